"""The progress bar finishes: at the end of a run it stands at the run's end, "writing results";
a real-time run that falls behind says so once, while it runs, with what to change."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from emulator.cli.main import main
from emulator.harness.runner import Tick
from emulator.measure.sampler import COLUMNS, SampleRow
from emulator.results.console import RunProgress

ROOT = Path(__file__).resolve().parents[2]


def test_the_bar_ends_at_the_run_end_while_the_results_are_written(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["run", str(ROOT / "scenarios" / "quickstart.toml"), "--out", str(tmp_path / "qs")]) == 0
    err = capsys.readouterr().err  # the bar is on stderr, the tables on stdout
    (bar,) = [line for line in err.splitlines() if " hb/s " in line]
    assert bar.startswith("writing results") and "t=1,800/1,800s" in bar


def tick(t: float, lag: float) -> Tick:
    zero: dict[str, Any] = dict.fromkeys(COLUMNS, 0)
    return Tick(SampleRow(**{**zero, "t_s": t}), 0, lag, 0.3)


def test_falling_behind_is_said_once_with_the_fix(monkeypatch: pytest.MonkeyPatch) -> None:
    console = Console(record=True, width=300, force_terminal=False)
    wall = iter(float(i) for i in range(100))
    monkeypatch.setattr("emulator.results.console.wall_time", lambda: next(wall))
    with RunProgress(600.0, console, speed=20.0) as bar:
        bar.update(tick(30.0, 0.1))
        assert "falling behind" not in console.export_text(clear=False)
        bar.update(tick(60.0, 1.5))
        bar.update(tick(90.0, 2.0))
    text = console.export_text()
    assert text.count("falling behind real time") == 1
    assert "at t=60s" in text and "lower `run.speed` (now 20)" in text
