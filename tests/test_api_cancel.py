"""Cancelling ``await emulator.run_async(...)`` stops the run (partial results written first), and a
run of the API's own temporary directory that fails leaves no directory behind."""

from __future__ import annotations

import asyncio
import tempfile
import time
from pathlib import Path

import msgspec
import pytest

import emulator

ROOT = Path(__file__).resolve().parent.parent
QUICKSTART = ROOT / "scenarios" / "quickstart.toml"
# Real time at speed 30: 600 emulated s are 20 wall s, unless the cancel stops the run.
REALTIME = {"run.clock": "realtime", "run.speed": 30.0, "run.warmup_s": 0}


async def _cancel_while_running(out: Path | None) -> tuple[str, float]:
    """Start a run, cancel it once it runs; the CancelledError's message and how long the cancel
    took (wall s)."""
    started = asyncio.Event()
    loop = asyncio.get_running_loop()

    def progress(_tick: object) -> None:  # on the run's thread
        loop.call_soon_threadsafe(started.set)

    task = asyncio.create_task(
        emulator.run_async(QUICKSTART, out=out, duration_s=600, overrides=REALTIME, progress=progress)
    )
    await asyncio.wait_for(started.wait(), 15)  # it runs: a sample came
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
