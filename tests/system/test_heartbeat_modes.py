"""Periodic vs delta heartbeats end to end, the RM's view vs the nodes' real state, liveliness."""

from __future__ import annotations

from emulator.harness.runner import RunHandle, run_blocking
from emulator.measure.sampler import SampleRow
from emulator.results.summary import build_summary
from rm.state.cluster import EPS
from tests.helpers import run_with_handle, scenario


def assert_rm_matches_nodes(handle: RunHandle) -> None:
    """No node over capacity; the RM's allocations per node equal the containers really running."""
    by_address = {p.address: p for p in handle.hosting.processes}
    for record in handle.side.rm.nodes_view():
        nm = by_address[record.address]
        used = nm.used()
        assert used.cpu <= nm.resources.cpu + EPS and used.ram_gib <= nm.resources.ram_gib + EPS
        assert set(nm.running_containers()) == {c.container_id for c in record.containers}, record
        assert record.free.cpu >= -EPS and record.free.ram_gib >= -EPS
        assert abs((record.total.cpu - record.free.cpu) - used.cpu) < 1e-6


def workload(job_count: int = 40, mean: float = 50.0, loop: bool = False) -> dict:
    return {
        "operations": [
            {
                "name": "a",
                "cpu": 1,
                "ram_gib": 2,
                "job_count": job_count,
                "seconds_mean": mean,
                "seconds_deviation": 10,
                "loop": loop,
            },
            {
                "name": "b",
                "cpu": 2,
                "ram_gib": 1,
                "job_count": job_count,
                "seconds_mean": mean,
                "seconds_deviation": 10,
                "submit_at_s": 20,
                "loop": loop,
            },
        ]
    }


def test_delta_mode_is_silent_while_nothing_changes() -> None:
    sc = scenario(heartbeat={"mode": "delta", "interval_s": 3}, run={"duration_s": 3600})
    out = run_blocking(sc)
    assert out.nodes.registrations == 4
    assert out.nodes.heartbeats_sent == 0
    assert build_summary(out)["nodes_lost"] == 0  # no RM liveliness monitor in delta mode


def test_periodic_mode_beats_every_interval_even_when_idle() -> None:
    sc = scenario(heartbeat={"mode": "periodic", "interval_s": 3}, run={"duration_s": 300})
    out = run_blocking(sc)
    # 4 nodes, one beat per interval after registration (first tick spread over the first interval).
    assert 4 * 98 <= out.nodes.heartbeats_sent <= 4 * 100


def test_delta_mode_reports_only_changes_and_schedules_continuously() -> None:
    long_tasks = {
        "operations": [{"name": "a", "cpu": 1, "ram_gib": 1, "job_count": 8, "seconds_mean": 10_000}]
    }
    out, handle = run_with_handle(
        scenario(heartbeat={"mode": "delta"}, workload=long_tasks, run={"duration_s": 600})
    )
    # Pushed launches, one delta heartbeat per node that got containers, then silence.
    assert out.rm.counters.allocations == 8
    assert 1 <= out.nodes.heartbeats_sent <= 4
    assert out.nodes.statuses_sent == 8
    assert_rm_matches_nodes(handle)


def test_delta_and_periodic_reach_the_same_consistent_state() -> None:
    for mode in ("periodic", "delta"):
        out, handle = run_with_handle(
            scenario(heartbeat={"mode": mode, "interval_s": 2}, workload=workload(), run={"duration_s": 400})
        )
        summary = build_summary(out)
        assert summary["allocations"] == summary["containers_completed"] == 80, mode
        assert_rm_matches_nodes(handle)


def test_delta_mode_sends_far_fewer_heartbeats_for_the_same_work() -> None:
    counts = {}
    for mode in ("periodic", "delta"):
        out = run_blocking(
            scenario(
                heartbeat={"mode": mode}, workload=workload(loop=True, mean=300), run={"duration_s": 1800}
            )
        )
        counts[mode] = (out.nodes.heartbeats_sent, out.rm.counters.containers_completed)
    assert counts["delta"][0] < counts["periodic"][0] / 2
    # Same service: within 10% of the periodic run's completions.
    assert abs(counts["delta"][1] - counts["periodic"][1]) <= 0.1 * counts["periodic"][1]


def test_liveliness_monitor_removes_a_silent_node_and_requeues_its_tasks() -> None:
    sc = scenario(
        rm={"expiry_s": 30},
        workload={
            "operations": [{"name": "a", "cpu": 1, "ram_gib": 1, "job_count": 32, "seconds_mean": 100_000}]
        },
        run={"duration_s": 200},
    )

    def at_row(handle: RunHandle, row: SampleRow) -> None:
        if row.t_s == 60:  # at t=60 s the first node goes silent
            handle.hosting.processes[0].stop()

    out, handle = run_with_handle(sc, on_row=at_row)
    events = out.rm.counters
    assert events.nodes_lost == 1
    assert out.rm.nodes == 3
    # Its 8 tasks were requeued; the 3 survivors were full, so they wait.
    assert events.tasks_requeued == 8
    (op,) = out.operations
    assert (op.running, op.pending) == (24, 8)
    assert_rm_matches_nodes(handle)


def test_unhealthy_fault_takes_nodes_out_of_scheduling() -> None:
    sc = scenario(
        workload={
            "operations": [{"name": "a", "cpu": 1, "ram_gib": 1, "job_count": 200, "seconds_mean": 30}]
        },
        faults=[
            {"kind": "health", "at_s": 0, "count": 2, "healthy": False},
            {"kind": "health", "at_s": 200, "nodes": [], "fraction": 1.0, "healthy": True},
        ],
        run={"duration_s": 400},
    )
    out = run_blocking(sc)
    assert out.rm.counters.containers_completed == 200
    # While two of four nodes were unhealthy, at most 16 tasks ran at once.
    rows = [r for r in out.rows if 10 < r.t_s < 190]
    assert max(r.running_tasks for r in rows) <= 16
    assert max(r.running_tasks for r in out.rows) == 32


def test_join_over_spreads_registrations_over_that_time() -> None:
    def nodes_by_t(join: float) -> dict[float, int]:
        sc = scenario(
            cluster={"nodes": [{"count": 60, "cpu": 4, "ram_gib": 8}], "join_over_s": join},
            heartbeat={"mode": "periodic", "interval_s": 3}, run={"duration_s": 90, "sample_interval_s": 10},
        )
        return {row.t_s: row.nodes for row in run_blocking(sc).rows}

    at_once, ramp = nodes_by_t(0.0), nodes_by_t(60.0)
    assert at_once[10.0] == 60
    # About a sixth of the nodes per 10 s; every one in by 60 s.
    assert 3 <= ramp[10.0] <= 20 < ramp[30.0] < 50 < ramp[70.0] == 60
