"""The fault families of the in-memory suite over TCP, in real time: nodes in two worker
processes, ring liveness between them over real peer connections, faults applied inside the
workers at their emulated time, and the invariant checker on (tests/conftest.py), gathering every
node's real containers and ring view from the workers.

Small sizes at 20x: each run takes a few seconds of wall time. A run that fell behind real time
would be invalid, so each first asserts it was not overloaded.
"""

from __future__ import annotations

from typing import Any

import pytest

from emulator.harness.outcome import RunOutcome
from emulator.harness.runner import run_blocking
from emulator.results.summary import build_summary
from emulator.scenario.loader import scenario_from_dict
from tests.helpers import scenario
from tests.ring_support import INTERVAL, ring_scenario

SPEED = 20
TCP = {"kind": "tcp", "workers": 2}


def tcp_ring(**kw: Any) -> tuple[dict[str, Any], RunOutcome]:
    data = ring_scenario(**kw)
    data["transport"] = TCP
    data["run"] = {**data["run"], "clock": "realtime", "speed": SPEED}
    out = run_blocking(scenario_from_dict(data, "<tcp test>"), check_invariants=True)
    s = build_summary(out)
    assert not s["overloaded"], s["lag"]
    assert s["end_check"] == "passed"
    return s, out


def test_isolated_crashes_are_removed_within_two_intervals() -> None:
    s, out = tcp_ring(nodes=200, faults=[{"kind": "crash", "at_s": 40, "fraction": 0.05}], duration_s=75)
    assert s["crashed_nodes"] == 10 and s["crashed_removed"] == 10
    assert s["nodes_lost"] == 10 and s["false_removals"] == 0
    # A random 5% can crash two ring neighbours (ids are the ring order, 1..200): the one whose
    # watcher also died is found by the next watcher, within the rack bound of three intervals.
    latency = {r.machine_id: r.latency_s for r in out.removal_log if r.latency_s is not None}
    isolated = [t for m, t in latency.items() if {m % 200 + 1, (m - 2) % 200 + 1}.isdisjoint(latency)]
    assert isolated and max(isolated) <= 2 * INTERVAL, latency
    assert max(latency.values()) <= 3 * INTERVAL, latency
    # Liveness crossed between the two worker processes over real peer connections.
    assert s["ring_messages_per_node_minute"] > 0


def test_a_rack_of_20_consecutive_ids_across_both_workers() -> None:
    # Ids 91..110: the block spans the two workers' halves of the cluster.
    fault = {"kind": "crash", "at_s": 40, "count": 20, "consecutive": True, "first_id": 91}
    s, _ = tcp_ring(nodes=200, faults=[fault], duration_s=75)
    assert s["crashed_removed"] == 20 and s["false_removals"] == 0
    assert s["detection_latency_s"]["max"] <= 3 * INTERVAL


def test_stalls_loss_and_an_rm_stall_remove_nobody_with_kring() -> None:
    pause = {"kind": "pause", "fraction": 0.05, "duration_s": INTERVAL, "duration_max_s": 3 * INTERVAL}
    faults = [
        {"kind": "liveness_loss", "at_s": 15, "fraction": 0.05},
        {**pause, "at_s": 20},
        {"kind": "rm_stall", "at_s": 35, "duration_s": 10},
        {**pause, "at_s": 50},
    ]
    s, out = tcp_ring(nodes=200, faults=faults, duration_s=80)
    assert s["liveness_lost"] > 0 and s["ring_refuted"] > 0  # the faults did bite
    assert s["nodes_lost"] == 0 and s["false_removals"] == 0
    assert out.rm.inbound.wait_max_s > 8.5  # the RM really stalled


def test_the_worker_kill_fault_is_a_correlated_crash() -> None:
    s, out = tcp_ring(nodes=100, faults=[{"kind": "worker_kill", "at_s": 30, "worker": 1}], duration_s=60)
    (dead,) = out.dead_workers
    assert dead.worker == 1 and dead.nodes == 50 and 30 <= dead.t_s < 31
    assert s["crashed_nodes"] == 50 and s["crashed_removed"] == 50 and s["false_removals"] == 0
    assert s["detection_latency_s"]["max"] <= 3 * INTERVAL


def test_pause_longer_than_grace_is_removed_and_rejoins() -> None:
    fault = {"kind": "pause", "at_s": 25, "nodes": ["node-0-00007"], "duration_s": 20}
    s, out = tcp_ring(nodes=40, faults=[fault], ring={"grace_s": 9.0}, duration_s=70)
    assert s["nodes_lost"] == 1 and s["stalled_removals"] == 1 and s["false_removals"] == 0
    (removal,) = out.removal_log
    assert 25 + 9 < removal.t_s <= 25 + 9 + 2 * INTERVAL
    assert s["registrations"] == 41 and out.rm.nodes == 40  # back, with a new registration


def test_crash_then_rejoin_gets_the_nodes_back() -> None:
    fault = {"kind": "crash", "at_s": 20, "count": 5, "rejoin_after_s": 15}
    s, out = tcp_ring(nodes=40, faults=[fault], duration_s=60)
    assert s["nodes_lost"] == 5 and s["false_removals"] == 0 and s["registrations"] == 45
    assert out.rm.nodes == 40


@pytest.mark.parametrize(
    "fault",
    [{"loss": 0.1}, {"duplicate": 0.2, "reorder": 0.2}, {"delay_s": 1.0}],
    ids=["loss", "dup", "delay"],
)
def test_message_faults_lose_and_duplicate_no_task(fault: dict[str, Any]) -> None:
    sc = scenario(
        cluster={"nodes": [{"count": 8, "cpu": 8, "ram_gib": 16}]},
        heartbeat={"mode": "delta", "interval_s": 3, "rpc_timeout_s": 9},
        rm={"expiry_s": 120, "command_timeout_s": 15},
        ring={"probe_timeout": 1.0},
        transport=TCP,
        workload={"operations": [
            {"name": "a", "cpu": 1, "ram_gib": 2, "tasks": 150, "seconds_mean": 15, "seconds_deviation": 4},
        ]},
        faults=[{"kind": "messages", "at_s": 0, "duration_s": 100, **fault}],
        run={"duration_s": 160, "clock": "realtime", "speed": 40, "seed": 3},
    )
    out = run_blocking(sc, check_invariants=True)
    s = build_summary(out)
    assert not s["overloaded"], s["lag"]
    assert s["containers_completed"] == 150 and s["nodes_lost"] == 0
    assert s["end_check"] == "passed"
    plan = out.message_faults
    assert plan is not None and plan.dropped + plan.duplicated + plan.reordered + plan.delayed > 0


def test_unhealthy_nodes_leave_scheduling_over_tcp() -> None:
    sc = scenario(
        transport=TCP,
        workload={"operations": [{"name": "a", "cpu": 1, "ram_gib": 1, "tasks": 120, "seconds_mean": 30}]},
        faults=[
            {"kind": "health", "at_s": 0, "count": 2, "healthy": False},
            {"kind": "health", "at_s": 60, "nodes": [], "fraction": 1.0, "healthy": True},
        ],
        run={"duration_s": 220, "clock": "realtime", "speed": 40},
    )
    out = run_blocking(sc, check_invariants=True)
    assert out.lag is not None and not out.lag.overloaded
    assert out.rm.counters.containers_completed == 120
    rows = [r for r in out.rows if 10 < r.t_s < 55]
    assert max(r.running_tasks for r in rows) <= 16  # two of four nodes out
    assert max(r.running_tasks for r in out.rows) == 32
