"""Command lines that used to end in a traceback (or never end): each is one `error:` line and
exit status 2."""

from __future__ import annotations

import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from emulator.cli.main import main

GOOD = """
[cluster]
nodes = [{ count = 2, cpu = 8, ram_gib = 16 }]
[run]
duration_s = 10
"""


@pytest.fixture
def good(tmp_path: Path) -> Path:
    p = tmp_path / "good.toml"
    p.write_text(GOOD)
    return p


def emulator(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "emulator", *args], capture_output=True, text=True,
                          timeout=timeout)


def test_out_pointing_at_a_file(good: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", str(good), "--out", str(good), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert err == f"error: {good}: cannot be the results directory (--out): File exists\n"
    assert main(["run", str(good), "--out", str(good / "sub"), "--quiet"]) == 2
    assert "cannot be the results directory (--out): Not a directory" in capsys.readouterr().err


@pytest.fixture
def taken_port() -> Iterator[int]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        yield s.getsockname()[1]


def test_an_rm_on_a_port_in_use(good: Path, tmp_path: Path, taken_port: int) -> None:
    proc = emulator("rm", str(good), "--listen", f"127.0.0.1:{taken_port}", "--out", str(tmp_path / "rm"),
                    "--quiet")
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr
    # It never served: no run record is left for a later start to "resume".
    assert not (tmp_path / "rm" / "rm-run.json").exists()
    assert not (tmp_path / "rm" / "run.json").exists()
    assert f"error: cannot listen: error while attempting to bind on address ('127.0.0.1', {taken_port})" \
        in proc.stderr
    assert "address already in use; choose another address or port" in proc.stderr


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["run", "{good}", "--serve", "0", "--speed", "-1"], "argument --speed: expected a number > 0"),
        (["run", "{good}", "--serve", "0", "--speed", "nan"], "argument --speed: expected a number > 0"),
        (["run", "{good}", "--serve", "0", "--speed", "inf"], "argument --speed: expected a number > 0"),
        (["run", "{good}", "--serve", "0", "--linger", "-5"], "argument --linger: expected a number >= 0"),
        (["run", "{good}", "--duration", "nan"], "argument --duration: expected a number > 0"),
        (["nodes", "--connect", "127.0.0.1:1", "--count", "3", "--workers", "0"],
         "argument --workers: expected a whole number from 1 to 1,024, got 0"),
        (["nodes", "--connect", "127.0.0.1:1", "--count", "0"], "argument --count: expected a whole number"),
        (["nodes", "--connect", "127.0.0.1:1", "--count", "1", "--cpu", "nan"], "argument --cpu:"),
        (["efficiency", "--nodes", "-3"], "argument --nodes: expected a whole number from 1"),
        # The bench is a study: its options are its parameters, checked before any point runs.
        (["study", "{bench}", "--set", "nodes=-3"], "(from `--set`): at `params.nodes`: expected `int` >= 1"),
        (["study", "{bench}", "--set", "hours=nan"], "at `params.hours`: expected `float` > 0"),
    ],
)
def test_bad_numbers_on_the_command_line(good: Path, argv: list[str], expected: str) -> None:
    bench = Path(__file__).parents[2] / "scenarios" / "studies" / "bench.toml"
    proc = emulator(*(a.replace("{good}", str(good)).replace("{bench}", str(bench)) for a in argv),
                    timeout=30)
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr
    assert expected in proc.stderr


def test_set_takes_the_path_errors_print(good: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["validate", str(good), "--set", "cluster.nodes[0].cpu=-1"]) == 2
    err = capsys.readouterr().err
    assert "at `cluster.nodes[0].cpu`: expected `float` > 0.0" in err
    # The path in that message, as printed, is what --set takes.
    assert main(["validate", str(good), "--set", "cluster.nodes[0].count=5"]) == 0
    assert "(5 nodes" in capsys.readouterr().out
    assert main(["validate", str(good), "--set", "cluster.nodes.0.count=6"]) == 0
    assert "(6 nodes" in capsys.readouterr().out
