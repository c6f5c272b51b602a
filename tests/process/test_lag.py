"""The lag verdict: a real-time run that falls behind real time says so and exits 4."""

from __future__ import annotations

from pathlib import Path

import msgspec
import pytest

from emulator.cli.main import main
from emulator.results.console import EXIT_OVERLOADED

QUICKSTART = Path(__file__).parents[2] / "scenarios" / "quickstart.toml"


def run_realtime(out: Path, speed: float) -> tuple[int, dict]:
    code = main(["run", str(QUICKSTART), "--duration", "90", "--set", "run.warmup_s=0",
                 "--set", "run.clock=realtime", "--set", f"run.speed={speed}", "--out", str(out), "--quiet"])
    return code, msgspec.json.decode((out / "summary.json").read_bytes())


def test_an_overloaded_run_is_flagged_and_exits_4(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # 5000x: one millisecond of timer slack is 5 emulated seconds, beyond any 3 s heartbeat.
    code, summary = run_realtime(tmp_path, 5000)
    assert code == EXIT_OVERLOADED
    lag = summary["lag"]
    assert summary["overloaded"] and lag["overloaded"] and lag["reasons"]
    assert lag["heartbeat_send_s"]["p99"] > lag["threshold_s"] == pytest.approx(0.3)
    assert "overloaded: the emulator fell behind real time" in capsys.readouterr().err
    # Commands and reports are still in flight: the end-of-run comparison would mean nothing.
    assert summary["end_check"] == "skipped: the run was overloaded"


def test_a_healthy_run_passes(tmp_path: Path) -> None:
    # 30x: the threshold (0.3 emulated s) is 10 wall ms, room for a busy test machine.
    code, summary = run_realtime(tmp_path, 30)
    assert code == 0 and not summary["overloaded"], summary["lag"]
    assert summary["lag"]["measured_intervals"] > 0
    assert summary["end_check"] == "passed"


def test_a_virtual_run_has_no_lag_verdict(tmp_path: Path) -> None:
    code = main(["run", str(QUICKSTART), "--duration", "330", "--out", str(tmp_path), "--quiet"])
    summary = msgspec.json.decode((tmp_path / "summary.json").read_bytes())
    assert code == 0 and "lag" not in summary and "overloaded" not in summary
