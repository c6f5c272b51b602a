"""The ring panel's document: the RM's real ring, in its order, as at most ``MAX_ARCS`` arcs.

The ring's members are taken in the order the RM published them (with the ring off: the
registered nodes by machine id) and cut into consecutive arcs of about equal size; each arc
carries how many of its members are in each state, so the page can colour an arc by the
fractions in it. At 10,000 nodes a 5% crash paints 5% of the ring, not every arc holding one.
A small ring gets one arc per member. Nodes off the ring (removed, or registered but not yet in
the published ring) are counted apart.
"""

from __future__ import annotations

from typing import Any

from emulator.web.state import LiveRun

MAX_ARCS = 360
# Member states, least to most severe (the order of the counts in each arc).
ARC_STATES = ("alive", "unhealthy", "suspected", "paused", "crashed")
MEMBERSHIP_EVENTS = ("node.registered", "node.reregistered", "node.lost", "node.unhealthy",
                     "node.healthy", "ring.", "membership.")


def ring(live: LiveRun, max_arcs: int = MAX_ARCS) -> dict[str, Any]:
    run = live.run
    counts = dict.fromkeys((*ARC_STATES, "joining", "lost"), 0)
    if run is None:
        return {"version": None, "source": None, "size": 0, "arc_states": list(ARC_STATES), "arcs": [],
                "counts": counts, "changes": []}
    rm = run.side.rm
    snap = rm.ring_snapshot()
    records = {n.machine_id: n for n in rm.nodes_view()}
    order = list(snap.members) if snap is not None else sorted(records)
    suspected = set(snap.suspected) | set(snap.held) if snap is not None else set()
    by_id = {mid: a for a, mid in run.side.hosting.machine_ids().items()}
    fates = run.side.faults.fates
    index = {s: i for i, s in enumerate(ARC_STATES)}
    states: list[int] = []
    for mid in order:
        rec = records.get(mid)
        address = rec.address if rec is not None else by_id.get(mid, "")
        hit = live.injected.get(address)
        # The RM's suspicion first: a crashed node turns from "crashed" (not noticed yet) to
        # "suspected" (noticed, removal on its way), then leaves the ring.
        if mid in suspected or rec is None:  # no record: removed, the ring is about to follow
            st = "suspected"
        elif hit is not None:
            st = hit.kind
        elif fates.stalled_for(address) > 0:  # a pause of the scenario's (the page's are in `injected`)
            st = "paused"
        elif rec is not None and rec.state == "unhealthy":
            st = "unhealthy"
        else:
            st = "alive"
        states.append(index[st])
        counts[st] += 1
    on_ring = set(order)
    counts["joining"] = sum(1 for mid in records if mid not in on_ring)
    counts["lost"] = len(live.gone)  # removed and not back: /metrics' lost nodes too
    n = len(order)
    k = min(n, max_arcs)
    arcs: list[list[int]] = []
    for b in range(k):
        lo, hi = b * n // k, (b + 1) * n // k
        row = [order[lo], order[hi - 1], *([0] * len(ARC_STATES))]
        for s in states[lo:hi]:
            row[2 + s] += 1
        arcs.append(row)
    changes = live.events.since(0, limit=40, kinds=MEMBERSHIP_EVENTS)
    changes.reverse()
    return {
        "version": snap.version if snap is not None else None,
        "source": "rm.ring" if snap is not None else "registered nodes",
        "size": n,
        "arc_states": list(ARC_STATES),
        # [first machine id, last machine id, members alive, unhealthy, suspected, paused, crashed]
        "arcs": arcs,
        "counts": counts,
        "changes": changes,
    }
