"""End to end over TCP with separate processes (127.0.0.1, a few seconds of wall time each)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

SCENARIO = """
name = "mp"
[cluster]
nodes = [{{ count = {nodes}, cpu = 20, ram_gib = 40 }}]
[heartbeat]
mode = "{mode}"
interval_s = 3.0
[transport]
kind = "tcp"
workers = {workers}
[[workload.operations]]
name = "job"
cpu = 1
ram_gib = 2
job_count = {tasks}
seconds_mean = 12
seconds_deviation = 3
[run]
duration_s = {duration}
clock = "realtime"
speed = 10
warmup_s = 6
"""


def emulator(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "emulator", *args],
        capture_output=True, text=True, timeout=timeout, check=False,
    )


def test_run_starts_rm_and_two_node_workers_and_merges_their_counters(tmp_path: Path) -> None:
    sc = tmp_path / "mp.toml"
    sc.write_text(SCENARIO.format(nodes=1000, mode="periodic", workers=2, tasks=4000, duration=45))
    out = tmp_path / "out"
    proc = emulator("run", str(sc), "--out", str(out), "--quiet")
    assert proc.returncode == 0, proc.stderr
    s = json.loads((out / "summary.json").read_text())
    assert s["registrations"] == 1000 and s["nodes_alive_end"] == 1000
    # 1000 nodes x 45 s / 3 s = 15,000 heartbeats, counted in the two worker processes.
    assert 13_000 <= s["heartbeats_sent"] <= 15_500
    assert s["heartbeat_responses"] >= s["heartbeats_sent"] - 1000
    assert s["allocations"] == 4000 and s["containers_completed"] > 3000
    assert [w["nodes"] for w in s["workers"]] == [500, 500]
    assert s["h1"] is not None and 0 < s["h1"] <= 1 and 0 < s["h2"] <= 1
    costs = s["costs"]
    assert costs["busy_us_by_type"]["Heartbeat"]["count"] >= 13_000
    assert 0 < costs["rm_busy_fraction"] < 1
    # Periodic: ~20 heartbeats per node per emulated minute, plus the registration.
    assert 18 <= costs["messages_to_rm_per_node_minute"] <= 22
    lines = (out / "timeseries.csv").read_text().splitlines()
    rows = [dict(zip(lines[0].split(","), line.split(","), strict=True)) for line in lines[1:]]
    assert sum(int(r["n_i"]) for r in rows) > 12_000  # n_i merged into the time series
    # The RM's arrivals and timely updates, as in memory: s_i of the a_i that arrived, never more.
    assert sum(int(r["a_i"]) for r in rows) > 12_000
    assert all(0 <= int(r["s_i"]) <= int(r["a_i"]) for r in rows)
    assert (out / "events.worker-0.jsonl").exists() and (out / "events.worker-1.jsonl").exists()


def test_rm_and_nodes_commands_as_separate_processes(tmp_path: Path) -> None:
    sc = tmp_path / "rm.toml"
    sc.write_text(SCENARIO.format(nodes=300, mode="delta", workers=1, tasks=600, duration=60))
    rm = subprocess.Popen(
        [sys.executable, "-m", "emulator", "rm", str(sc), "--listen", "127.0.0.1:0", "--duration", "60",
         "--out", str(tmp_path / "rm"), "--quiet"],
        stderr=subprocess.PIPE, text=True,
    )
    try:
        assert rm.stderr is not None
        said = rm.stderr.readline()  # no secret given: the loopback RM made one for its nodes
        said += rm.stderr.readline()
        m = re.search(r"listening on (\S+):(\d+)", said)
        assert m and "rm-secret" in said, said
        nodes = emulator("nodes", "--connect", f"{m[1]}:{m[2]}", "--count", "300", "--workers", "2",
                         "--mode", "delta", "--speed", "10", "--duration", "50",
                         "--credentials-file", str(tmp_path / "rm" / "rm-secret"))
        assert nodes.returncode == 0, nodes.stderr
        assert "node worker processes" in nodes.stdout
        _, err = rm.communicate(timeout=30)
        assert rm.returncode == 0, err
    finally:
        if rm.poll() is None:
            rm.kill()
            rm.communicate()
    s = json.loads((tmp_path / "rm" / "summary.json").read_text())
    assert s["registrations"] == 300 and s["allocations"] == 600
    assert s["costs"]["transport"]["frames_in"] > 300


def test_bad_address_is_a_clear_error() -> None:
    proc = emulator("nodes", "--connect", "localhost", "--count", "1")
    assert proc.returncode == 2
    assert "--connect: expected HOST:PORT" in proc.stderr


def test_rm_restart_over_tcp_nodes_reconnect_and_keep_their_containers(tmp_path: Path) -> None:
    sc = tmp_path / "mp.toml"
    text = SCENARIO.format(nodes=200, mode="periodic", workers=1, tasks=2000, duration=60)
    text = text.replace("seconds_mean = 12", "seconds_mean = 40")
    sc.write_text(text + '\n[[faults]]\nkind = "rm_restart"\nat_s = 20\ndowntime_s = 4\n')
    out = tmp_path / "out"
    proc = emulator("run", str(sc), "--out", str(out), "--quiet", timeout=90)
    assert proc.returncode == 0, proc.stderr
    s = json.loads((out / "summary.json").read_text())
    (r,) = s["rm_restarts"]
    # Every node process noticed, reconnected over a new TCP connection and re-registered with
    # its containers; the new RM took every journaled container back and ran none again.
    assert r["nodes_back"] == 200 and r["recovery_s"] is not None
    assert r["containers_waiting"] > 100 and r["containers_kept"] == r["containers_waiting"]
    assert s["workers"][0]["reconnects"] >= 1
    assert s["registrations"] >= 400 and s["tasks_requeued"] == 0
    assert (out / "rm-journal.jsonl").exists()
