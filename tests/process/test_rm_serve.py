"""`emulator rm --serve`: the RM process alone behind the status page, with nodes from another process."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

SCENARIO = """
[cluster]
nodes = [{ count = 4, cpu = 8, ram_gib = 16 }]
[[workload.operations]]
name = "a"
cpu = 1
ram_gib = 1
job_count = 40
seconds_mean = 60
[run]
duration_s = 200
clock = "realtime"
speed = 20
"""


def _wait_lines(proc: subprocess.Popen[str], patterns: list[str], lines: int = 50) -> list[str]:
    """The first group of each pattern, from the first ``lines`` lines of stderr, in any order."""
    assert proc.stderr is not None
    found: dict[str, str] = {}
    for _ in range(lines):
        line = proc.stderr.readline()
        if not line:
            break
        for p in patterns:
            m = re.search(p, line)
            if m:
                found[p] = m.group(1)
        if len(found) == len(patterns):
            return [found[p] for p in patterns]
    raise AssertionError(f"missing {set(patterns) - set(found)}")


def test_rm_alone_serves_the_page_and_sees_remote_nodes(tmp_path: Path) -> None:
    sc = tmp_path / "s.toml"
    sc.write_text(SCENARIO)
    rm = subprocess.Popen(
        [sys.executable, "-m", "emulator", "rm", str(sc), "--listen", "127.0.0.1:0", "--serve",
         "127.0.0.1:0", "--out", str(tmp_path / "rm"), "--quiet"],
        stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True,
    )
    nodes = None
    try:
        addr, url = _wait_lines(rm, [r"rm listening on (\S+)", r"status page: (\S+)"])
        url = url.rstrip("/")
        nodes = subprocess.Popen(
            [sys.executable, "-m", "emulator", "nodes", "--connect", addr, "--count", "4",
             "--scenario", str(sc), "--credentials-file", str(tmp_path / "rm" / "rm-secret"), "--quiet"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 20
        cluster: dict = {}
        while time.monotonic() < deadline:
            with urllib.request.urlopen(f"{url}/api/cluster", timeout=5) as r:
                cluster = json.loads(r.read())
            if cluster.get("nodes_registered") == 4 and cluster.get("running_tasks", 0) > 0:
                break
            time.sleep(0.3)
        assert cluster.get("nodes_registered") == 4, cluster
        assert cluster.get("running_tasks", 0) > 0, cluster
        with urllib.request.urlopen(f"{url}/", timeout=5) as r:
            assert b"<html" in r.read().lower()
    finally:
        for p in (nodes, rm):
            if p is not None:
                p.terminate()
                try:
                    p.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait(timeout=10)
                if p.stderr is not None:
                    p.stderr.close()
