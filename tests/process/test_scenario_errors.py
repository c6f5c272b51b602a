"""Bad scenario files: one clear message naming the file, the field path and the expectation."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from emulator.cli.main import main

GOOD = """
[cluster]
nodes = [{ count = 2, cpu = 8, ram_gib = 16 }]
[run]
duration_s = 10
"""


def write(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "bad.toml"
    p.write_text(text)
    return p


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (GOOD.replace("cpu = 8", "cpu = -8"), "at `cluster.nodes[0].cpu`: expected `float` > 0"),
        (
            GOOD.replace("cpu = 8", 'cpu = "eight"'),
            "at `cluster.nodes[0].cpu`: expected `float | object`, got `str`",
        ),
        (
            GOOD.replace("cpu = 8", "cpu = 8, gpus = 1"),
            "at `cluster.nodes[0].gpus`: unknown field (expected one of `count`, `cpu`, `name`, `ram_gib`)",
        ),
        (  # a typo gets the field it was probably meant to be
            GOOD.replace("cpu = 8", "cpus = 8"),
            "at `cluster.nodes[0].cpus`: unknown field; did you mean `cpu`? (expected one of `count`, `cpu`,",
        ),
        (GOOD + "[run2]\n", "at `run2`: unknown field; did you mean `run`? (expected one of `cluster`,"),
        (
            GOOD + "[heartbeat]\nmode = 'sometimes'\n",
            "at `heartbeat.mode`: unknown heartbeat mode `sometimes`; expected one of the registered ones: "
            "`delta`, `periodic`",
        ),
        (GOOD + "[heartbeat]\ninterval_s = 0\n", "at `heartbeat.interval_s`: expected `float` > 0"),
        (
            GOOD.replace("duration_s = 10", "duration_s = 10\nwarmup_s = 20"),
            "at `run`: `warmup_s` must be smaller",
        ),
        (
            GOOD.replace("[run]", "[scheduler]\npolicy = 'lottery'\n[run]"),
            "at `scheduler.policy`: unknown scheduling policy `lottery`; expected one of the registered "
            "ones: `drf`, `drfh`, `fifo`, `packing`, `tetris`",
        ),
        (  # issue 31: validated, then packing silently never ran
            GOOD.replace(
                "[run]", "[scheduler]\npolicy = 'packing'\n[scheduler.placement]\npolicy = 'best-fit'\n[run]"
            ),
            "at `scheduler.policy`: `packing` would never run: `scheduler.placement.policy = \"best-fit\"`",
        ),
        (GOOD.replace("duration_s = 10", ""), "at `run`: object missing required field `duration_s`"),
        (
            GOOD + "[[faults]]\nkind = 'meteor'\nat_s = 1\ncount = 1\n",
            "at `faults[0].kind`: invalid value 'meteor'; expected one of `health`",
        ),
        (GOOD.replace("cpu = 8", "cpu = { uniform = [5, 1] }"), "`uniform` needs 0 < low <= high"),
        (
            GOOD
            + "[[workload.operations]]\nname='a'\ncpu=1\nram_gib=1\njob_count=0\nseconds_mean=1\nloop=true\n",
            "at `workload.operations[0]`: a looping operation needs `tasks` >= 1",
        ),
        ("[cluster\n", "not valid TOML"),
        (
            GOOD + "[[faults]]\nkind = 'worker_kill'\nat_s = 5\n",
            "a `worker_kill` fault needs worker processes: `transport.kind = \"tcp\"`",
        ),
        (
            GOOD.replace("[run]", "[transport]\nkind = 'tcp'\nworkers = 2\n[run]\nclock = 'realtime'")
            + "[[faults]]\nkind = 'worker_kill'\nat_s = 5\nworker = 2\n",
            "`worker_kill`: worker 2 of 2",
        ),
        # Node resources a registration would be refused with (inf, absurd) are refused here.
        (GOOD.replace("cpu = 8", "cpu = { uniform = [1, inf] }"), "at `cluster.nodes[0].cpu.uniform[1]`"),
        (GOOD.replace("cpu = 8", "cpu = 1e300"), "at `cluster.nodes[0].cpu`: expected `float` <= 1000000.0"),
        (GOOD.replace("cpu = 8", "cpu = { choice = [nan] }"), "at `cluster.nodes[0].cpu.choice[0]`"),
        (
            GOOD + "[[workload.pools]]\nname = 'a'\nparent = 'b'\n"
            "[[workload.pools]]\nname = 'b'\nparent = 'a'\n",
            "at `workload.pools[0].parent`: pools form a cycle: `a` -> `b` -> `a`",
        ),
        (
            GOOD + "[[workload.pools]]\nname = 'a'\nparent = 'a'\n",
            "at `workload.pools[0].parent`: pools form a cycle: `a` -> `a`",
        ),
        (
            GOOD + "[[workload.operations]]\nname='a'\ncpu=1\nram_gib=1\ntasks=1\nseconds_mean=1\n"
            "[[workload.operations]]\nname='b'\ncpu=9\nram_gib=1\ntasks=1\nseconds_mean=1\n",
            "at `workload.operations[1]`: a task needs 9 cpu and 1 GiB, more than any node has (largest: "
            "8 cpu, 16 GiB)",
        ),
        (
            GOOD + "[[faults]]\nkind = 'health'\nat_s = 10\ncount = 1\n",
            "at `faults[0].at_s`: 10 s is not before the run ends (`run.duration_s` = 10)",
        ),
        (
            GOOD + "[rm]\nexpiry_s = 2\n",
            "at `rm.expiry_s`: 2 s is not longer than the longest wait for a live node's heartbeat, 3 s "
            "(`heartbeat.interval_s`)",
        ),
        (
            GOOD + "[[faults]]\nkind = 'liveness_loss'\nat_s = 1\nfraction = 0.5\n",
            "at `faults[0].kind`: a `liveness_loss` fault needs the ring, which is off",
        ),
        (GOOD + "x = " + "[" * 1000 + "]" * 1000 + "\n", "not valid TOML: arrays or tables nested too"),
        (GOOD + "x = " + "{a = " * 1000 + "1" + "}" * 1000 + "\n", "nested too deeply"),
    ],
)
def test_bad_fields_are_reported_with_file_and_path(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str, expected: str
) -> None:
    path = write(tmp_path, text)
    assert main(["validate", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: {path}: ")
    assert expected in err
    assert "Traceback" not in err


def test_missing_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", str(tmp_path / "nope.toml"), "--quiet"]) == 2
    assert "nope.toml: no such file" in capsys.readouterr().err


def test_bad_override(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write(tmp_path, GOOD)
    assert main(["validate", str(path), "--set", "heartbeat.mode=sometimes"]) == 2
    assert "at `heartbeat.mode`" in capsys.readouterr().err
    assert main(["validate", str(path), "--set", "nonsense"]) == 2


def test_override_indexes_arrays_and_says_when_it_cannot(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write(tmp_path, GOOD)
    assert main(["validate", str(path), "--set", "cluster.nodes.0.count=7"]) == 0
    assert "(7 nodes" in capsys.readouterr().out
    assert main(["validate", str(path), "--set", "cluster.nodes.5.count=7"]) == 2
    assert "`cluster.nodes.5` must index the array (0..0)" in capsys.readouterr().err
    assert main(["validate", str(path), "--set", "run.duration_s.x=1"]) == 2
    assert "`run.duration_s.x` is inside a value" in capsys.readouterr().err



def test_console_script_exits_2_without_traceback(tmp_path: Path) -> None:
    path = write(tmp_path, GOOD.replace("cpu = 8", "cpu = -1"))
    proc = subprocess.run(
        [sys.executable, "-m", "emulator", "run", str(path)], capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr
    assert "cluster.nodes[0].cpu" in proc.stderr
