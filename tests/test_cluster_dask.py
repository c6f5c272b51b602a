"""`emulator run SCENARIO --cluster ADDRESS`: node hosts as tasks on a real Dask cluster (a
LocalCluster of two worker processes here, on loopback), their reports gathered into the run's
results; a Dask worker process killed mid-run is a correlated crash of its nodes the ring finds."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

distributed = pytest.importorskip("distributed")

SCENARIO = """
name = "on-dask"
[cluster]
nodes = [{{ count = {nodes}, cpu = 20, ram_gib = 40 }}]
[heartbeat]
mode = "delta"
interval_s = 3.0
[ring]
interval_s = 3.0
[transport]
kind = "tcp"
workers = 2
[[workload.operations]]
name = "job"
cpu = 1
ram_gib = 2
tasks = 400
seconds_mean = 40
loop = true
[run]
duration_s = {duration}
clock = "realtime"
speed = 10
"""


@pytest.fixture
def cluster() -> Iterator[distributed.Client]:
    with distributed.LocalCluster(
        n_workers=2, processes=True, threads_per_worker=1, dashboard_address=None, host="127.0.0.1",
    ) as local, distributed.Client(local) as client:
        yield client


def start_run(tmp_path: Path, address: str, nodes: int, duration: float,
              *extra: str) -> tuple[subprocess.Popen[str], Path]:
    sc = tmp_path / "on-dask.toml"
    sc.write_text(SCENARIO.format(nodes=nodes, duration=duration))
    out = tmp_path / "out"
    proc = subprocess.Popen(
        [sys.executable, "-m", "emulator", "run", str(sc), "--out", str(out), "--quiet",
         "--cluster", address, "--listen", "127.0.0.1:0", *extra],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    return proc, out


def finish(proc: subprocess.Popen[str], timeout_s: float) -> str:
    try:
        _, err = proc.communicate(timeout=timeout_s)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    return err


@pytest.mark.slow
def test_node_hosts_run_as_tasks_on_the_dask_workers_and_report_back(
    tmp_path: Path, cluster: distributed.Client
) -> None:
    pids = set(cluster.run(os.getpid).values())
    proc, out = start_run(tmp_path, cluster.scheduler.address, nodes=60, duration=60)
    err = finish(proc, 60)
    assert proc.returncode == 0, err
    s = json.loads((out / "summary.json").read_text())
    # Every node registered and ran its heartbeats, hosted by the two Dask worker processes.
    assert s["nodes_alive_end"] == 60 and s["crashed_nodes"] == 0 and not s.get("dead_workers")
    assert [w["nodes"] for w in s["workers"]] == [30, 30]
    assert s["heartbeats_sent"] > 0 and s["h1"] is not None and s["h1"] > 0.9
    events = [json.loads(line) for line in (out / "events.jsonl").read_text().splitlines()]
    joined = [e for e in events if e["event"] == "worker.joined"]
    assert {e["pid"] for e in joined} == pids
    # Each host's event log came back from its worker machine into the results directory.
    for i in range(2):
        assert '"host.connected"' in (out / f"events.worker-{i}.jsonl").read_text()


@pytest.mark.slow
def test_a_killed_dask_worker_is_a_correlated_crash_the_ring_finds(
    tmp_path: Path, cluster: distributed.Client
) -> None:
    by_address = cluster.run(os.getpid)
    proc, out = start_run(tmp_path, cluster.scheduler.address, nodes=60, duration=75)
    try:
        victim = by_address[min(by_address)]  # slices go to the workers in address order
        time.sleep(5 + 3.0)  # past the epoch (5 s of set-up), to t = 30 s
        os.kill(victim, signal.SIGKILL)
        err = finish(proc, 60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, err
    s = json.loads((out / "summary.json").read_text())
    (dead,) = s["dead_workers"]
    assert dead["pid"] == victim and dead["nodes"] == 30 and 15 <= dead["t_s"] <= 45
    # All its nodes found and removed by the ring, nobody else; the other host still reported.
    assert s["crashed_nodes"] == 30 and s["crashed_removed"] == 30
    assert s["false_removals"] == 0 and s["nodes_alive_end"] == 30
    assert [w["nodes"] for w in s["workers"]] == [30]
