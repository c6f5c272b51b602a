"""docs/usage.md's two-process TCP commands work as written: `emulator rm` prints the command that
starts its nodes, and that command, run as printed, registers every node and runs to the end."""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
USAGE = (ROOT / "docs" / "usage.md").read_text(encoding="utf-8")


def test_the_rm_prints_the_nodes_command_and_it_works_as_printed(tmp_path: Path) -> None:
    (rm_line,) = [line for line in USAGE.splitlines() if line.startswith(".venv/bin/emulator rm ")]
    argv = shlex.split(rm_line.split("#")[0])[1:]
    # The doc's port and hour of wall time: a free port and a few seconds here.
    argv[argv.index("--listen") + 1] = "127.0.0.1:0"
    argv[argv.index("--duration") + 1] = "6"
    rm = subprocess.Popen([sys.executable, "-m", "emulator", *argv, "--out", str(tmp_path / "rm"), "--quiet"],
                          cwd=ROOT, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True)
    try:
        assert rm.stderr is not None
        command = None
        for _ in range(20):
            m = re.match(r"start its nodes: (emulator nodes .*)$", rm.stderr.readline().strip())
            if m:
                command = m.group(1)
                break
        assert command is not None, "emulator rm did not print the nodes' command"
        assert "--credentials-file" in command and "--start-at" in command
        nodes = subprocess.run([sys.executable, "-m", *shlex.split(command)], cwd=ROOT, capture_output=True,
                               text=True, timeout=60)
        assert nodes.returncode == 0, nodes.stderr
        assert rm.wait(timeout=60) == 0
    finally:
        if rm.poll() is None:
            rm.kill()
            rm.wait()
        if rm.stderr is not None:
            rm.stderr.close()
    summary = json.loads((tmp_path / "rm" / "summary.json").read_text())
    assert summary["nodes"] > 0 and summary["nodes_alive_end"] == summary["nodes"]  # every node registered
    assert "error" not in nodes.stderr
    # The nodes' process shows its progress to the end and says where the results are.
    assert "collecting reports" in nodes.stderr and "t=6/6s" in nodes.stderr
    assert "results: the run's are written by the RM at" in nodes.stderr
