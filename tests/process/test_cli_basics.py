"""What a new user meets first: --version, a grouped --help, flags that need --serve, a --duration
shorter than the scenario's warm-up, and a bench that says what it is doing."""

from __future__ import annotations

import re
from functools import partial
from pathlib import Path

import msgspec
import pytest

from emulator.cli.main import COMMAND_GROUPS, build_parser, main
from emulator.experiments import bench
from emulator.experiments.bench import markdown_table, memory_per_node, run_bench
from emulator.experiments.floor import floor_us_per_heartbeat
from emulator.results.record import load_record

QUICKSTART = Path(__file__).parents[2] / "scenarios" / "quickstart.toml"


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["--version"])
    assert exit_.value.code == 0
    assert re.fullmatch(r"emulator \(hbemu\) \S+, commit \S+\n", capsys.readouterr().out)


def test_help_groups_every_command(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["--help"])
    text = capsys.readouterr().out
    for group in COMMAND_GROUPS:
        assert f"\n{group}:\n" in text
    sub = next(a for a in build_parser()._actions if a.dest == "command")
    assert sub.choices is not None
    for name in sub.choices:
        assert re.search(rf"^  {re.escape(name)} +\S", text, re.M), name
    # Listed once, in its group: not a second flat list.
    assert text.count("  rerun ") == 1
    run_at, rm_at = text.index("\nrun:\n"), text.index("\nprocesses:\n")
    assert run_at < text.index("  rerun ") < rm_at < text.index("  nodes ")


@pytest.mark.parametrize("flags", [["--allow-control"], ["--speed", "5"], ["--linger", "3"],
                                   ["--speed", "5", "--allow-control"]])
def test_serve_only_flags_need_serve(flags: list[str], tmp_path: Path,
                                     capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", str(QUICKSTART), "--out", str(tmp_path / "r"), "--quiet", *flags]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: --") and "only with --serve" in err
    for flag in flags:
        if flag.startswith("--"):
            assert flag in err
    assert not (tmp_path / "r").exists()  # refused before anything ran


def test_short_duration_scales_the_warmup(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "short"
    assert main(["run", str(QUICKSTART), "--duration", "10", "--out", str(out), "--quiet"]) == 0
    err = capsys.readouterr().err
    assert "run.warmup_s scaled from 300 to 1.66667 s" in err and "--duration 10" in err
    summary = msgspec.json.decode((out / "summary.json").read_bytes())
    assert (summary["duration_s"], summary["warmup_s"]) == (10.0, 1.666667)
    assert load_record(out).adjustments == [err.splitlines()[0].split(": ", 2)[2].strip()]


def test_short_duration_with_a_warmup_set_by_hand(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", str(QUICKSTART), "--duration", "10", "--set", "run.warmup_s=20",
                 "--out", str(tmp_path / "r"), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert "--duration 10 is not longer than the warm-up run.warmup_s = 20" in err


def test_bench_reports_progress(monkeypatch: pytest.MonkeyPatch) -> None:
    # The floor and the memory calibration at a tenth of their default sizes: the same code,
    # and the assertions below need only that they ran and gave a positive floor (3 s -> 0.3 s).
    monkeypatch.setattr(bench, "floor_us_per_heartbeat", partial(floor_us_per_heartbeat, heartbeats=30_000))
    monkeypatch.setattr(bench, "memory_per_node", partial(memory_per_node, count=500))
    lines: list[str] = []
    report = run_bench(nodes=4, hours=0.01, progress=lines.append, baseline=True)
    assert [line.split(":")[1].strip() for line in lines[:8]] == [
        "periodic (des)", "periodic (des)", "periodic (asyncio)", "periodic (asyncio)",
        "delta (des)", "delta (des)", "delta (asyncio)", "delta (asyncio)",
    ]
    assert "started" in lines[0] and "finished in" in lines[1] and "heartbeats" in lines[1]
    assert f"{report['delta']['heartbeats']:,} heartbeats" in lines[5]
    # The first design ran the same emulation: the same heartbeats, in the same invocation.
    assert report["baseline"]["periodic"]["heartbeats"] == report["periodic"]["heartbeats"]
    assert report["baseline"]["delta"]["heartbeats"] == report["delta"]["heartbeats"]
    assert "memory" in lines[-1] and "finished" in lines[-1]
    assert any(line.startswith("bench: floor: ") and "µs per heartbeat" in line for line in lines)
    # The gap to the floor is part of every bench: the emulator is slower than the bare loop.
    assert report["floor_us_per_heartbeat"] > 0 and report["periodic"]["x_floor"] > 1
    table = markdown_table(report)
    assert f"{report['periodic']['us_per_heartbeat']:.1f} ({report['periodic']['x_floor']:g}×)" in table
    assert "The first design (asyncio's loop as the virtual clock" in table


def test_short_duration_drops_the_faults_after_its_end(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    text = QUICKSTART.read_text(encoding="utf-8").replace("warmup_s = 300", "warmup_s = 0")
    text += ('\n[[faults]]\nkind = "crash"\nat_s = 5\ncount = 1\n'
             '\n[[faults]]\nkind = "rm_stall"\nat_s = 50\nduration_s = 5\n')
    path = tmp_path / "faulty.toml"
    path.write_text(text, encoding="utf-8")
    out = tmp_path / "short"
    assert main(["run", str(path), "--duration", "20", "--out", str(out), "--quiet"]) == 0
    err = capsys.readouterr().err
    assert "faults[1] (rm_stall at 50 s) dropped: at or after the end of the run shortened by --duration 20" \
        in err
    summary = msgspec.json.decode((out / "summary.json").read_bytes())
    assert summary["crashed_nodes"] == 1  # the fault before the end still happens
    # In the file itself the late fault is a mistake, and said so.
    path.write_text(text.replace("duration_s = 1800", "duration_s = 20"), encoding="utf-8")
    assert main(["run", str(path), "--out", str(tmp_path / "x"), "--quiet"]) == 2
    assert "at `faults[1].at_s`: 50 s is not before the run ends" in capsys.readouterr().err


def test_sigterm_stops_a_bench_instead_of_starting_its_next_run() -> None:
    import signal
    import subprocess
    import sys
    import time

    proc = subprocess.Popen([sys.executable, "-m", "emulator", "bench", "--nodes", "2000", "--hours", "1"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stderr is not None
        for line in proc.stderr:  # wait until the first run is under way
            if "periodic (des): started" in line:
                break
        time.sleep(2)
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 130, err
    assert "delta (des): started" not in err and "interrupted" in err
