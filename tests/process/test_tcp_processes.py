"""Real processes killed for real: a node worker dies under kill -9 (a correlated crash the ring
must find), and a run is stopped with SIGINT / SIGTERM (partial results, no process left)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

SCENARIO = """
name = "procs"
[cluster]
nodes = [{{ count = {nodes}, cpu = 20, ram_gib = 40 }}]
[heartbeat]
mode = "delta"
interval_s = 3.0
[ring]
interval_s = 3.0
[transport]
kind = "{transport}"
workers = 2
[[workload.operations]]
name = "job"
cpu = 1
ram_gib = 2
tasks = 1000
seconds_mean = 40
loop = true
[run]
duration_s = {duration}
clock = "realtime"
speed = 10
"""


def children(pid: int) -> list[int]:
    """Live child processes of ``pid`` (from /proc)."""
    out = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        if ppid == pid:
            out.append(int(entry.name))
    return out


def alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def start_run(
    tmp_path: Path, transport: str, nodes: int, duration: float
) -> tuple[subprocess.Popen[str], Path]:
    sc = tmp_path / "procs.toml"
    sc.write_text(SCENARIO.format(transport=transport, nodes=nodes, duration=duration))
    out = tmp_path / "out"
    proc = subprocess.Popen([sys.executable, "-m", "emulator", "run", str(sc), "--out", str(out), "--quiet"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    return proc, out


def wait_for_workers(proc: subprocess.Popen[str], n: int) -> list[int]:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        kids = children(proc.pid)
        if len(kids) >= n:
            return kids
        time.sleep(0.1)
    proc.kill()
    raise AssertionError(f"no {n} worker processes: {proc.communicate()}")


def test_a_worker_killed_with_sigkill_is_a_correlated_crash_the_ring_finds(tmp_path: Path) -> None:
    proc, out = start_run(tmp_path, "tcp", nodes=200, duration=75)
    try:
        victim, *_ = wait_for_workers(proc, 2)
        time.sleep(2 + 3.0)  # past the epoch (2 s of margin), to t = 30 s
        os.kill(victim, signal.SIGKILL)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 0, err
    s = json.loads((out / "summary.json").read_text())
    (dead,) = s["dead_workers"]
    assert dead["pid"] == victim and dead["nodes"] == 100 and 20 <= dead["t_s"] <= 45
    # All its nodes found and removed by the ring, nobody else.
    assert s["crashed_nodes"] == 100 and s["crashed_removed"] == 100
    assert s["false_removals"] == 0 and s["nodes_alive_end"] == 100
    assert s["detection_latency_s"]["max"] <= 3 * 3.0
    assert not s["overloaded"], s["lag"]


@pytest.mark.parametrize(("transport", "sig"), [("tcp", signal.SIGINT), ("memory", signal.SIGTERM)])
def test_a_signal_stops_a_run_with_partial_results_and_no_process_left(
    tmp_path: Path, transport: str, sig: signal.Signals
) -> None:
    proc, out = start_run(tmp_path, transport, nodes=100, duration=600)
    try:
        kids = wait_for_workers(proc, 2) if transport == "tcp" else []
        time.sleep(4)
        stopped = time.monotonic()
        proc.send_signal(sig)
        _, err = proc.communicate(timeout=30)
        took = time.monotonic() - stopped
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 130, err
    assert took < 10
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("stopped at t=") and "partial results in" in lines[0]
    s = json.loads((out / "summary.json").read_text())
    assert s["partial"] is True and 0 < s["ended_at_s"] < 600
    assert (out / "timeseries.csv").read_text().count("\n") > 2
    assert not any(alive(k) for k in kids)
