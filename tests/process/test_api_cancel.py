"""Cancelling ``await emulator.run_async(...)`` stops the run (partial results written first), and a
run of the API's own temporary directory that fails leaves no directory behind."""

from __future__ import annotations

import asyncio
import os
import tempfile
import time
from pathlib import Path
from typing import Any

import msgspec
import pytest

import emulator

ROOT = Path(__file__).resolve().parents[2]
QUICKSTART = ROOT / "scenarios" / "quickstart.toml"
# Real time at speed 30: 600 emulated s are 20 wall s, unless the cancel stops the run.
REALTIME = {"run.clock": "realtime", "run.speed": 30.0, "run.warmup_s": 0}


async def _cancel_while_running(out: Path | None, **more: Any) -> tuple[str, float]:
    """Start a run, cancel it once it runs; the CancelledError's message and how long the cancel
    took (wall s). ``more``: further overrides."""
    started = asyncio.Event()
    loop = asyncio.get_running_loop()

    def progress(_tick: object) -> None:  # on the run's thread
        loop.call_soon_threadsafe(started.set)

    task = asyncio.create_task(
        emulator.run_async(QUICKSTART, out=out, duration_s=600, overrides={**REALTIME, **more},
                           progress=progress)
    )
    await asyncio.wait_for(started.wait(), 30)  # it runs: a sample came
    await asyncio.sleep(0.5)
    t0 = time.monotonic()
    task.cancel()
    with pytest.raises(asyncio.CancelledError) as err:
        await task
    return str(err.value), time.monotonic() - t0


@pytest.mark.asyncio
async def test_cancelling_run_async_stops_the_run_with_partial_results(tmp_path: Path) -> None:
    out = tmp_path / "run"
    _, took = await _cancel_while_running(out)
    assert took < 1.0, took  # stopped within a second, results written
    summary = msgspec.json.decode((out / "summary.json").read_bytes(), type=dict)
    assert summary["partial"] is True and summary["ended_at_s"] < 300, summary.get("ended_at_s")
    assert emulator.load(out).partial


def _children() -> list[int]:
    """This process's child processes (its TCP run's node hosts)."""
    me, out = str(os.getpid()), []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue  # gone meanwhile
        if fields[1] == me and fields[0] != "Z":
            out.append(int(stat.parent.name))
    return out


@pytest.mark.asyncio
async def test_cancelling_a_tcp_run_stops_its_node_hosts(tmp_path: Path) -> None:
    out = tmp_path / "run"
    _, took = await _cancel_while_running(out, **{"transport.kind": "tcp", "transport.workers": 1})
    assert took < 2.0, took  # the node hosts are told to stop and report
    assert msgspec.json.decode((out / "summary.json").read_bytes(), type=dict)["partial"] is True
    assert _children() == []


@pytest.mark.asyncio
async def test_a_cancelled_run_in_a_temporary_directory_names_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    message, _ = await _cancel_while_running(None)
    (run_dir,) = tmp_path.iterdir()
    assert f"partial results in {run_dir}" in message
    assert msgspec.json.decode((run_dir / "summary.json").read_bytes(), type=dict)["partial"] is True


def test_a_failed_run_leaves_no_temporary_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))

    def broken(_tick: object) -> None:
        raise RuntimeError("the progress display broke")

    with pytest.raises(RuntimeError, match="progress display broke"):
        emulator.run(QUICKSTART, duration_s=300, progress=broken)
    assert list(tmp_path.iterdir()) == []
