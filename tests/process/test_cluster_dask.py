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
from typing import Any

import distributed
import pytest

from emulator.cli.main import main
from emulator.harness.dask_hosts import ClusterError, spread
from emulator.study.sweep import sweep_of

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


@pytest.fixture(scope="module")
def local_cluster() -> Iterator[tuple[distributed.Client, str]]:
    """A client of a local Dask cluster, and its scheduler's address: one for the module's runs,
    as a user's cluster serves run after run (its start and stop cost seconds a test)."""
    with distributed.LocalCluster(
        n_workers=2, processes=True, threads_per_worker=1, dashboard_address=None, host="127.0.0.1",
    ) as local, distributed.Client(local) as client:
        yield client, local.scheduler_address


@pytest.fixture
def cluster(local_cluster: tuple[distributed.Client, str]) -> tuple[distributed.Client, str]:
    """The module's cluster with both its workers up (its nanny restarts one a test killed)."""
    client, _ = local_cluster
    client.wait_for_workers(2, timeout=60)
    return local_cluster


def slices_computed(client: distributed.Client) -> float:
    """Seconds the cluster has spent on node-slice tasks so far (only ever grows)."""

    def seconds(dask_scheduler: Any) -> float:
        prefix = dask_scheduler.task_prefixes.get("hbemu-slice")
        return 0.0 if prefix is None else float(prefix.all_durations.get("compute", 0.0))

    return float(client.run_on_scheduler(seconds))


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


def test_node_hosts_run_as_tasks_on_the_dask_workers_and_report_back(
    tmp_path: Path, cluster: tuple[distributed.Client, str]
) -> None:
    client, address = cluster
    pids = set(client.run(os.getpid).values())
    proc, out = start_run(tmp_path, address, nodes=60, duration=30)
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


def test_slices_spread_over_the_workers_threads_and_too_few_threads_is_an_error() -> None:
    assert spread({"tcp://b:1": 1, "tcp://a:1": 1}, 2) == ["tcp://a:1", "tcp://b:1"]
    assert spread({"tcp://a:1": 2, "tcp://b:1": 1}, 3) == ["tcp://a:1", "tcp://b:1", "tcp://a:1"]
    with pytest.raises(ClusterError, match=r"1 worker thread\(s\) and the run needs 2"):
        spread({"tcp://a:1": 1}, 2)


@pytest.mark.parametrize(("scenario", "flags", "message"), [
    ("scenarios/quickstart.toml", ["--cluster", "tcp://127.0.0.1:1"],
     '`transport.kind`: --cluster needs "tcp"'),
    ("scenarios/e3-tcp.toml", ["--listen", "127.0.0.1:7077"], "--listen: only with --cluster"),
    ("scenarios/e3-tcp.toml", ["--cluster", "tcp://127.0.0.1:1", "--listen", "0.0.0.0:7077"],
     "not a wildcard"),
])
def test_cluster_flags_a_run_cannot_use_are_errors_before_anything_runs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], scenario: str, flags: list[str], message: str
) -> None:
    assert main(["run", scenario, "--out", str(tmp_path / "out"), "--quiet", *flags]) == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


E2_STUDY = """
scenario = "scenario.toml"
metrics = ["h1", "h2", "heartbeats_sent", "update_events", "allocations", "nodes_lost",
           "rm_queue_depth_max", "rm_wait_p99_s", "messages_to_rm_per_node_minute"]
collect = ["heartbeats_skipped", "registrations", "costs", "workers", "lag", "timing.wall_s",
           "timing.lateness_p99_s", "rm.busy_s"]
[axes]
nodes = [40]
heartbeat.mode = ["delta"]
[limits]
"""


def test_a_studys_node_hosts_are_tasks_on_the_given_cluster(
    tmp_path: Path, cluster: tuple[distributed.Client, str]
) -> None:
    client, address = cluster
    before = slices_computed(client)
    (tmp_path / "scenario.toml").write_text(SCENARIO.format(nodes=40, duration=30))
    (tmp_path / "e2.toml").write_text(E2_STUDY)
    out = tmp_path / "out.json"
    proc = subprocess.run(
        [sys.executable, "-m", "emulator", "study", str(tmp_path / "e2.toml"), "--out", str(out),
         "--cluster", address], capture_output=True, text=True, timeout=120,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert slices_computed(client) > before  # the scheduler ran this study's node slices
    sweep = sweep_of(json.loads(out.read_text()))
    assert sweep["rows"][0]["workers"] == 2 and sweep["hosting"] == f"dask {address}"


def test_a_killed_dask_worker_is_a_correlated_crash_the_ring_finds(
    tmp_path: Path, cluster: tuple[distributed.Client, str]
) -> None:
    """Last in the module: the module's cluster gets a new worker process in place of the killed one."""
    client, address = cluster
    by_address: dict[str, int] = client.run(os.getpid)
    proc, out = start_run(tmp_path, address, nodes=60, duration=75)
    try:
        victim = by_address[min(by_address)]  # slices go to the workers in address order
        deadline = time.monotonic() + 30
        while sum(map(len, client.processing().values())) < 2 and time.monotonic() < deadline:
            time.sleep(0.1)
        time.sleep(6)  # the slices were submitted about 5 s before the epoch: kill at t = 10..40 s
        os.kill(victim, signal.SIGKILL)
        err = finish(proc, 60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, err
    s = json.loads((out / "summary.json").read_text())
    (dead,) = s["dead_workers"]
    assert dead["pid"] == victim and dead["nodes"] == 30 and 5 <= dead["t_s"] <= 50
    # All its nodes found and removed by the ring, nobody else; the other host still reported.
    assert s["crashed_nodes"] == 30 and s["crashed_removed"] == 30
    assert s["false_removals"] == 0 and s["nodes_alive_end"] == 30
    assert [w["nodes"] for w in s["workers"]] == [30]
