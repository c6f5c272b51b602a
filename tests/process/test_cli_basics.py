"""What a new user meets first: --version, a grouped --help, flags that need --serve, a --duration
shorter than the scenario's warm-up."""

from __future__ import annotations

import re
from pathlib import Path

import msgspec
import pytest

from emulator.cli.main import COMMAND_GROUPS, build_parser, main
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




def test_sigterm_stops_the_bench_study_instead_of_starting_its_next_point(tmp_path: Path) -> None:
    import signal
    import subprocess
    import sys
    import time

    study = Path(__file__).parents[2] / "scenarios" / "studies" / "bench.toml"
    proc = subprocess.Popen([sys.executable, "-m", "emulator", "study", str(study), "--set", "nodes=2000",
                             "--out", str(tmp_path / "bench.json")],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stderr is not None
        for line in proc.stderr:  # wait until the first point is under way
            if "speed|mode=periodic|design=des: started" in line:
                break
        time.sleep(2)
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 130, err
    assert "speed|mode=delta|design=des: started" not in err
    assert "interrupted: 0 of 4 points" in err
