"""The ring panel's document from a real run with the ring on (virtual time): the RM's own ring
order, suspected nodes, crashed ones, and aggregate arcs."""

from __future__ import annotations

from typing import Any

from emulator.harness.runner import RunHandle, Tick, run_scenario
from emulator.scenario.loader import scenario_from_dict
from emulator.time.clock import LoopClock, run
from emulator.web.ringview import ARC_STATES, ring
from emulator.web.state import LiveRun
from rm.views.snapshot import RingSnapshot


def ring_run(max_arcs: int) -> list[tuple[float, RingSnapshot, dict[str, Any]]]:
    """60 nodes, kring detector, 3 nodes crashed at 30 s; the ring document at every sample."""
    scenario = scenario_from_dict({
        "name": "ringview",
        "cluster": {"nodes": [{"count": 60, "cpu": 8, "ram_gib": 32}]},
        "heartbeat": {"mode": "delta", "interval_s": 3.0},
        "ring": {"detector": "kring", "interval_s": 3.0},
        "workload": {"operations": [{"name": "w", "cpu": 1, "ram_gib": 2, "job_count": 100,
                                     "seconds_mean": 30, "seconds_deviation": 5, "loop": True}]},
        "faults": [{"kind": "crash", "at_s": 30, "count": 3}],
        "run": {"duration_s": 90, "seed": 2, "sample_interval_s": 1.0},
    })
    live = LiveRun(scenario)
    docs: list[tuple[float, RingSnapshot, dict[str, Any]]] = []

    def attach(handle: RunHandle) -> None:
        live.attach(handle.side, handle.clock, handle.log, handle.hosting.processes)

    def sample(tick: Tick) -> None:
        assert live.run is not None
        snap = live.run.side.rm.ring_snapshot()
        assert snap is not None
        docs.append((tick.row.t_s, snap, ring(live, max_arcs)))

    async def main(clock: LoopClock) -> None:
        from emulator.web.events import EventTap

        await run_scenario(scenario, clock, EventTap(live.events), sample, on_start=attach)

    run(main)
    return docs


def test_ring_document_follows_the_rms_ring_and_its_suspicions() -> None:
    docs = ring_run(max_arcs=16)
    assert len(docs) >= 80
    saw_suspected = saw_crashed = False
    for t, snap, doc in docs:
        members = snap.members
        n = len(members)
        assert doc["source"] == "rm.ring" and doc["size"] == n
        k = min(n, 16)
        assert len(doc["arcs"]) == k
        # Arcs are consecutive runs of the RM's ring, in its order.
        assert [a[0] for a in doc["arcs"]] == [members[b * n // k] for b in range(k)]
        assert [a[1] for a in doc["arcs"]] == [members[(b + 1) * n // k - 1] for b in range(k)]
        assert sum(sum(a[2:]) for a in doc["arcs"]) == n
        per_state = [sum(a[2 + i] for a in doc["arcs"]) for i in range(len(ARC_STATES))]
        assert per_state == [doc["counts"][s] for s in ARC_STATES]
        # The RM's open suspicions (and held removals) of members are drawn as such.
        open_ = {m for m in (*snap.suspected, *snap.held) if m in set(members)}
        assert doc["counts"]["suspected"] >= len(open_)
        saw_suspected |= bool(open_)
        saw_crashed |= t > 30 and doc["counts"]["crashed"] > 0
    assert saw_crashed
    assert saw_suspected  # crashed members' successors report them: the RM suspects, then removes
    last = docs[-1][2]
    assert last["counts"]["lost"] == 3 and last["counts"]["crashed"] == 0 and last["size"] == 57
