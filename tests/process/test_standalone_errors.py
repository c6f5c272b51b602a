"""The standalone topology's failures end in one clear error and a non-zero exit: node hosts whose
every node the RM refused, and addresses that do not resolve (nothing is started or written)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCENARIO = """
[cluster]
nodes = [{ count = 3, cpu = 8, ram_gib = 16 }]
[run]
duration_s = 60
clock = "realtime"
speed = 20
"""


def emulator(*args: str, timeout: float = 30) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "emulator", *args], capture_output=True, text=True,
                          timeout=timeout, cwd=ROOT)


def test_nodes_all_refused_by_the_rm_is_an_error(tmp_path: Path) -> None:
    sc = tmp_path / "s.toml"
    sc.write_text(SCENARIO)
    rm = subprocess.Popen([sys.executable, "-m", "emulator", "rm", str(sc), "--out", str(tmp_path / "rm"),
                           "--quiet"], stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True, cwd=ROOT)
    try:
        assert rm.stderr is not None
        addr = None
        for _ in range(20):
            m = re.search(r"rm listening on (\S+)", rm.stderr.readline())
            if m:
                addr = m.group(1)
                break
        assert addr is not None
        nodes = emulator("nodes", "--connect", addr, "--count", "3", "--scenario", str(sc),
                         "--credentials", "not-the-secret", "--quiet")
    finally:
        rm.kill()
        rm.wait(timeout=10)
        if rm.stderr is not None:
            rm.stderr.close()
    assert nodes.returncode == 1, nodes.stderr
    (line,) = nodes.stderr.strip().splitlines()
    assert line.startswith(f"error: none of the 3 nodes registered with the RM at {addr}: it refused their "
                           "proof of the shared secret (")
    assert line.endswith("a wrong shared secret (--credentials-file; an RM given none keeps its own in its "
                         "--out directory, rm-secret)")


@pytest.mark.parametrize("args", [
    ("run", "scenarios/quickstart.toml", "--serve", "nohost.invalid:0", "--duration", "60"),
    ("rm", "scenarios/quickstart.toml", "--serve", "nohost.invalid:0"),
    ("rm", "scenarios/quickstart.toml", "--listen", "nohost.invalid:0"),
])
def test_an_address_that_does_not_resolve_is_one_error(tmp_path: Path, args: tuple[str, ...]) -> None:
    out = tmp_path / "out"
    proc = emulator(*args, "--out", str(out))
    assert proc.returncode == 2, proc.stderr
    flag = args[2]
    (line,) = proc.stderr.strip().splitlines()
    assert line.startswith(f"error: {flag}: cannot resolve the host 'nohost.invalid': "), line
    assert not out.exists()  # refused before anything was written
