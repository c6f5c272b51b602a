"""`emulator rm` + `emulator nodes --scenario` in delta mode: the node hosts carry the ring.

Without ring monitors a quiet cluster's live nodes are removed as silent with no live watcher, and
a hung node host goes unnoticed; with them neither happens.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

SCENARIO = """
[cluster]
nodes = [{ count = 6, cpu = 8, ram_gib = 16 }]
[heartbeat]
mode = "delta"
interval_s = 3.0
[ring]
detector = "kring"
interval_s = 3.0
[run]
duration_s = {duration}
clock = "realtime"
speed = {speed}
"""
SPEED = 20  # 150 emulated s in 7.5 s of wall time


def _rm_address(proc: subprocess.Popen[str]) -> str:
    assert proc.stderr is not None
    for _ in range(50):
        line = proc.stderr.readline()
        m = re.search(r"rm listening on (\S+)", line)
        if m:
            return m.group(1)
    raise AssertionError("the RM never said where it listens")


def _lost(events: Path) -> list[dict[str, object]]:
    out = []
    for line in events.read_text(encoding="utf-8").splitlines():
        ev = json.loads(line)
        if ev.get("event") == "node.lost":
            out.append(ev)
    return out


def _pair(tmp_path: Path, duration: int, hosts: int, stop_second: bool) -> list[dict[str, object]]:
    """Run an RM and ``hosts`` `emulator nodes` processes (3 nodes each, a node's ring neighbours
    may live in the other); SIGSTOP the second one's workers 40% of the way in if asked.
    Returns the RM's node.lost events."""
    sc = tmp_path / "s.toml"
    sc.write_text(SCENARIO.replace("{duration}", str(duration)).replace("{speed}", str(SPEED)))
    out = tmp_path / "rm"
    start_at = time.time() + 3.0
    rm = subprocess.Popen(
        [sys.executable, "-m", "emulator", "rm", str(sc), "--out", str(out), "--quiet",
         "--start-at", str(start_at)],
        stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True,
    )
    procs: list[subprocess.Popen[str]] = []
    try:
        addr = _rm_address(rm)
        for i in range(hosts):
            procs.append(subprocess.Popen(
                [sys.executable, "-m", "emulator", "nodes", "--connect", addr, "--count", "3",
                 "--first-id", str(3 * i), "--scenario", str(sc), "--start-at", str(start_at),
                 "--credentials-file", str(out / "rm-secret"), "--quiet"],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, text=True,
                start_new_session=True,  # its own group: SIGSTOP reaches its worker too
            ))
        if stop_second:
            time.sleep(max(0.0, start_at - time.time()) + 0.4 * duration / SPEED)
            os.killpg(procs[1].pid, signal.SIGSTOP)
        rm.wait(timeout=duration / SPEED + 20)
        return _lost(out / "events.jsonl")
    finally:
        for p in [*procs, rm]:
            if p.poll() is None:
                if p is not rm:
                    os.killpg(p.pid, signal.SIGKILL)
                else:
                    p.kill()
                p.wait(timeout=10)
            if p.stderr is not None:
                p.stderr.close()


def test_a_quiet_delta_cluster_keeps_its_nodes_and_finds_a_hung_host(tmp_path: Path) -> None:
    """60 emulated s of a quiet cluster (before the fix its live nodes were removed as silent,
    with no live watcher), then one host hangs: exactly its nodes are removed, by ring watchers."""
    lost = _pair(tmp_path, duration=150, hosts=2, stop_second=True)
    assert all(float(str(ev["t"])) >= 60.0 for ev in lost), lost  # nobody while all were alive
    gone = sorted(str(ev["address"]) for ev in lost)
    assert len(gone) == 3, lost  # exactly the stopped host's three nodes
    assert gone == ["node-0-00003", "node-0-00004", "node-0-00005"], lost
    # Found by its ring watchers on the other host, not as the silence of a ring with none.
    assert all("reported by" in str(ev["reason"]) for ev in lost), lost
