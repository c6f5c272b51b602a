"""How the RM publishes ring changes (rm/membership/ring_publisher.py): joins batched per interval,
and a delta broadcast a chunk per turn of the RM's loop, never after a newer one."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from ringmon.membership import RingView, decode_ids
from ringmon.protocol import RingDelta, RingUpdate
from rm.membership import broadcast, ring_publisher
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
    monkeypatch.setattr(broadcast, "BROADCAST_CHUNK", 10)
    monkeypatch.setattr(broadcast, "SCAN_CHUNK", 40)
    monkeypatch.setattr(broadcast, "CHANGED_CHUNK", 4)

    def body(clock: FakeClock) -> None:
        c = Cluster(clock, 60)
        clock.advance_to(1.0)  # the joins' delta, sent out whole by now (60 changes: 15 turns)
        assert all(len(link.of(RingDelta)) == 1 for link in c.links.values())
        c.rm.remove_node(record(c.rm, 30), "x")
        c.svc.publisher.flush()
        got = {mid for mid, link in c.links.items() if len(link.of(RingDelta)) == 2}
        # The nodes next to 30 and one chunk of the rest now; the others on later turns.
        assert {29, 31} <= got and len(got) < 59
        c.rm.remove_node(record(c.rm, 40), "x")
        c.svc.publisher.flush()  # a newer delta goes out once the older one has reached everyone
        assert not any(len(link.of(RingDelta)) == 3 for link in c.links.values())
        clock.advance_to(clock.now())  # the loop turns: the rest of both, in version order
        for mid, link in c.links.items():
            if mid not in (30, 40):
                versions = [d.version for d in link.of(RingDelta)]
                assert versions == sorted(versions) and len(versions) == 3, mid

    drive(body)


def test_a_join_storm_goes_out_in_steps_to_the_same_nodes_in_the_same_order_as_at_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Steps change when nodes get a delta, not who gets it nor in what order: the nodes next to
    a change before everyone else, each node once."""

    def sends(chunks: tuple[int, int]) -> tuple[int, list[int], set[int]]:
        monkeypatch.setattr(broadcast, "CHANGED_CHUNK", chunks[0])
        monkeypatch.setattr(broadcast, "BROADCAST_CHUNK", chunks[1])
        monkeypatch.setattr(broadcast, "SCAN_CHUNK", 4 * chunks[1])
        order: list[int] = []  # the nodes of the first 40 sent the delta, in order
        out: list[int] = []
        near: set[int] = set()

        def body(clock: FakeClock) -> None:
            c = Cluster(clock, 40, strides=[1, 8])
            clock.advance_to(4.0)
            for mid, link in c.links.items():
                link.send = _noting(mid, order)  # type: ignore[method-assign,assignment]
            gone = [3, 4, 17, 25]
            for mid in gone:  # removals, then joins (taking their ids again, and two more)
                c.rm.remove_node(record(c.rm, mid), "x")
            for k in range(6):
                c.rm.receive(Link(), Register(address=f"late{k}", resources=Resources(4, 8)))
            changed = [*gone, *range(41, 43)]
            near.update(c.svc.ring.neighbours(changed).difference(changed))
            c.svc.publisher.flush()
            out.append(len(order))
            clock.advance_to(clock.now())

        drive(body)
        return out[0], order, near

    at_once, whole, near = sends((1000, 1000))
    first_step, chunked, _ = sends((2, 3))
    assert at_once == len(whole) == 36 and first_step == 0  # at once vs from the next turn on
    assert chunked == whole and len(set(whole)) == len(whole)  # the same order, each node once
    # Those next to a change first, by id, then everyone else in registration order.
    assert whole == [*sorted(near), *sorted(set(range(1, 41)) - near - {3, 4, 17, 25})]



@pytest.mark.parametrize("most", [10_000, 3])
def test_a_catch_up_over_many_versions_is_what_the_versions_say(
    monkeypatch: pytest.MonkeyPatch, most: int,
) -> None:
    """From every version the history covers, a node applying the answer holds the current ring,
    members and endpoints: one combined delta, or the whole ring past ``CATCH_UP_MAX_IDS``."""
    monkeypatch.setattr(ring_publisher, "CATCH_UP_MAX_IDS", most)

    def body(clock: FakeClock) -> None:
        c = Cluster(clock, 12)
        clock.advance_to(1.0)
        views = {c.svc.ring.version: c.svc.ring.published}
        for k in range(6):
            # Each version: removals, and joins on two hosts that take the freed ids again (a
            # new life: removed *and* added in one version) and new ones.
            for mid in ((4, 9), (5,), (6,), (7,), (8,), (10,))[k]:
                c.rm.remove_node(record(c.rm, mid), "x")
            for j in range(2 if k else 3):
                c.rm.receive(Link(), Register(address=f"v{k}-{j}", resources=Resources(4, 8),
                                              peer_endpoint=f"h{j}:1"))
            c.svc.publisher.flush()
            views[c.svc.ring.version] = c.svc.ring.published
        now = c.svc.ring.published
        kinds = set()
        for version, held in views.items():
            if version == now.version:
                continue
            link = Link()
            c.svc.publisher.catch_up(link, version)
            (answer,) = link.sent
            kinds.add(type(answer))
            got = held.apply(answer) if isinstance(answer, RingDelta) else RingView.of(answer.ring)
            assert got.version == now.version and got.ids == now.ids, version
            assert [got.endpoint(i) for i in got.ids] == [now.endpoint(i) for i in now.ids]
        # 1-2 changes per version: far behind means more than 3 changed ids, one behind does not.
        assert kinds == ({RingDelta} if most > 100 else {RingDelta, RingUpdate})

    drive(body)

def _noting(mid: int, order: list[int]) -> Callable[[object], None]:
    """A link's send that notes ``mid`` in ``order`` for each ring delta."""

    def send(msg: object) -> None:
        if isinstance(msg, RingDelta):
            order.append(mid)

    return send
