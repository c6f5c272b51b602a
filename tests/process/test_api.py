"""The Python API (docs/api.md): ``emulator.run`` from a script and from inside a running event
loop (as in a notebook), ``run_async``, the ``Result`` tables, and the example script."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import tempfile
import types
from pathlib import Path

import msgspec
import pytest

import emulator
from emulator.api import Table
from emulator.cli.main import main
from emulator.scenario.loader import load_scenario

ROOT = Path(__file__).resolve().parents[2]
QUICKSTART = ROOT / "scenarios" / "quickstart.toml"


def cli_summary(out: Path, *args: str) -> dict:
    assert main(["run", str(QUICKSTART), "--out", str(out), "--quiet", *args]) == 0
    return msgspec.json.decode((out / "summary.json").read_bytes(), type=dict)


@pytest.mark.asyncio
async def test_run_inside_a_running_loop_matches_the_cli(tmp_path: Path) -> None:
    asyncio.get_running_loop()  # as in a notebook cell: this thread runs a loop
    result = emulator.run(QUICKSTART, out=tmp_path / "api", seed=11, duration_s=600,
                          heartbeat__mode="delta")
    # The command line, on a thread of its own (it runs its loop itself, like the API's worker).
    expected = await asyncio.to_thread(cli_summary, tmp_path / "cli", "--seed", "11", "--duration", "600",
                                       "--set", "heartbeat.mode=delta")
    assert result.summary == expected
    assert result.summary["heartbeat_mode"] == "delta" and result.summary["seed"] == 11
    assert result.exit_status == 0 and not result.partial
    assert result.run_dir == tmp_path / "api"
    ts = result.timeseries
    assert ts.columns[0] == "t_s" and len(ts) == 200  # one sample per 3 s heartbeat interval
    assert ts.column("t_s")[-1] == 600.0 and ts.column("nodes")[0] == 50
    assert isinstance(ts.column("nodes")[0], int) and isinstance(ts.column("cpu_utilization")[5], float)


@pytest.mark.asyncio
async def test_run_async_leaves_the_loop_running(tmp_path: Path) -> None:
    ticks = 0

    async def heartbeat() -> None:
        nonlocal ticks
        while True:
            ticks += 1
            await asyncio.sleep(0.005)

    beat = asyncio.create_task(heartbeat())
    try:
        result = await emulator.run_async(QUICKSTART, out=tmp_path / "a", seed=11, duration_s=600)
    finally:
        beat.cancel()
    assert ticks > 5  # the caller's loop went on while the run ran on its worker thread
    sync = emulator.run(QUICKSTART, out=tmp_path / "b", seed=11, duration_s=600)
    assert result.summary == sync.summary


def test_from_a_plain_script_with_a_scenario_object_and_overrides(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
) -> None:
    cwd, temp = tmp_path / "cwd", tmp_path / "tmp"
    cwd.mkdir()
    temp.mkdir()
    monkeypatch.chdir(cwd)
    monkeypatch.setattr(tempfile, "tempdir", str(temp))
    sc = load_scenario(QUICKSTART)
    result = emulator.run(sc, duration_s=300, overrides={"scheduler.policy": "fifo", "run.warmup_s": 0})
    assert result.summary["policy"] == "fifo" and result.summary["duration_s"] == 300
    # No `out`: a fresh temporary directory, nothing in the current one.
    assert list(cwd.iterdir()) == []
    assert result.run_dir.parent == temp and result.run_dir.name.startswith("hbemu-run-")
    # The run directory can be run again and gives the same figures.
    assert main(["rerun", str(result.run_dir), "--out", str(result.run_dir) + "-again", "--quiet"]) == 0
    assert "results match" in capsys.readouterr().err
    # Same as loading the directory afterwards.
    assert emulator.load(result.run_dir).summary == result.summary


def test_bad_input_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(emulator.ScenarioError, match=r"quickstart.toml: .*heartbeat\.mode"):
        emulator.run(QUICKSTART, out=tmp_path / "x", heartbeat__mode="sometimes")
    with pytest.raises(emulator.ScenarioError, match="no such file"):
        emulator.run(tmp_path / "missing.toml")
    with pytest.raises(emulator.ScenarioError, match="expected a scenario file path or a Scenario"):
        emulator.run(42)  # type: ignore[arg-type]
    with pytest.raises(emulator.ScenarioError, match="not a results directory"):
        emulator.load(tmp_path)
    assert not (tmp_path / "x").exists()  # refused before anything was written


def test_tables_jobs_and_dataframe(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    result = emulator.run(QUICKSTART, out=tmp_path / "r", duration_s=300, seed=2)
    # Per-job figures (jobs.csv) as a table: one row per job, as many as the summary counts.
    assert len(result.jobs) == result.summary["jobs"]["count"] > 0
    assert {"job_id", "pool", "jct_s", "queue_delay_s"} <= set(result.jobs.columns)
    assert result.timing["scheduler_decision_us"]["count"] > 0  # timing.json: wall-clock figures
    (result.run_dir / "jobs.csv").write_text("job,pool,jct_s,finished\n1,etl,12.5,1\n2,etl,,0\n")
    jobs = emulator.load(result.run_dir).jobs
    assert jobs.columns == ("job", "pool", "jct_s", "finished")
    assert list(jobs) == [{"job": 1, "pool": "etl", "jct_s": 12.5, "finished": 1},
                          {"job": 2, "pool": "etl", "jct_s": None, "finished": 0}]
    with pytest.raises(KeyError, match="no column 'nope'"):
        jobs.column("nope")
    # to_dataframe: pandas only when asked for, with a clear message when it is not installed.
    monkeypatch.setitem(sys.modules, "pandas", None)
    with pytest.raises(ImportError, match="needs pandas"):
        result.timeseries.to_dataframe()
    seen: dict[str, object] = {}
    fake = types.ModuleType("pandas")
    fake.DataFrame = lambda rows, columns: seen.update(rows=rows, columns=columns) or "frame"  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "pandas", fake)
    assert Table(("a", "b"), [(1, 2.0)]).to_dataframe() == "frame"
    assert seen == {"rows": [(1, 2.0)], "columns": ["a", "b"]}


def test_import_emulator_stays_light() -> None:
    code = "import sys, emulator; print(sorted(m for m in sys.modules if m.startswith(('emulator.', 'rm'))))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env={**os.environ, "PYTHONPATH": str(ROOT)}, cwd=ROOT)
    assert out.stdout.strip() == "[]"


def test_the_example_script_runs(tmp_path: Path) -> None:
    script = ROOT / "docs" / "examples" / "api_example.py"
    out = subprocess.run([sys.executable, str(script), "--out", str(tmp_path / "ex")], capture_output=True,
                         text=True, env={**os.environ, "PYTHONPATH": str(ROOT)}, cwd=tmp_path, timeout=300)
    assert out.returncode == 0, out.stderr
    assert "periodic" in out.stdout and "delta" in out.stdout and "heartbeats sent" in out.stdout
    assert "same summary from a running event loop: True" in out.stdout
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ex"]
