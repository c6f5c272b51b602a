"""How the RM publishes ring changes (rm/membership/ring_publisher.py): joins batched per interval,
and a delta broadcast a chunk per turn of the RM's loop, never after a newer one."""

from __future__ import annotations

import pytest

from ringmon.membership import decode_ids
from ringmon.protocol import RingDelta
from rm.membership import ring_publisher
from rm.protocol import Register, Resources
from tests.helpers import FakeClock, record
from tests.unit.test_membership_rm import Cluster, Link, drive


def test_joins_wait_a_whole_interval_and_a_removal_takes_them_along() -> None:
    def body(clock: FakeClock) -> None:
        # A start-up storm: joins alone are published once per interval (3 s), not per batch_s.
        c = Cluster(clock, 4, join_batch=1.0)
        clock.advance_to(2.9)
        assert not c.links[1].of(RingDelta)
        clock.advance_to(3.0)
        assert [decode_ids(d.added) for d in c.links[1].of(RingDelta)] == [[1, 2, 3, 4]]
        # A join, then a removal 1 s later: both go out batch_s after the removal.
        c.rm.receive(Link(), Register(address="late", resources=Resources(4, 8)))
        clock.advance_to(4.0)
        c.rm.remove_node(record(c.rm, 2), "x")
        clock.advance_to(4.49)
        assert len(c.links[1].of(RingDelta)) == 1
        clock.advance_to(4.5)
        last = c.links[1].of(RingDelta)[-1]
        assert decode_ids(last.added) == [5] and decode_ids(last.removed) == [2]

    drive(body)


def test_a_delta_reaches_the_rest_a_chunk_per_loop_turn_and_never_after_a_newer_one(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(ring_publisher, "BROADCAST_CHUNK", 10)

    def body(clock: FakeClock) -> None:
        c = Cluster(clock, 60)
        clock.advance_to(1.0)  # the joins' delta, sent out whole by now
        assert all(len(link.of(RingDelta)) == 1 for link in c.links.values())
        c.rm.remove_node(record(c.rm, 30), "x")
        c.svc.publisher.flush()
        got = {mid for mid, link in c.links.items() if len(link.of(RingDelta)) == 2}
        # The nodes next to 30 and one chunk of the rest now; the others on later turns.
        assert {29, 31} <= got and len(got) < 59
        c.rm.remove_node(record(c.rm, 40), "x")
        c.svc.publisher.flush()  # a newer delta: the older one first reaches everyone
        for mid, link in c.links.items():
            if mid in (30, 40):
                continue
            versions = [d.version for d in link.of(RingDelta)]
            assert versions == sorted(versions) and len(versions) >= 2, mid
        clock.advance_to(clock.now())  # the loop turns: the rest of the newer one
        assert all(len(link.of(RingDelta)) == 3 for mid, link in c.links.items() if mid not in (30, 40))

    drive(body)
