"""A ring view answers its first queries of a stride by walking its sorted ids (the RM checks a
stale report against an older version once; sorting every member for it held the RM's loop for
milliseconds at 10,000+ nodes). The walk must give exactly the built order's answers."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from ringmon.membership import INDEX_AFTER_QUERIES, RingView


@settings(max_examples=150, deadline=None)
@given(ids=st.sets(st.integers(min_value=1, max_value=400), max_size=60),
       stride=st.sampled_from([1, 2, 3, 5, 7, 64]), absent=st.integers(min_value=1, max_value=400))
def test_the_walk_gives_the_built_orders_neighbours(ids: set[int], stride: int, absent: int) -> None:
    members = tuple(sorted(ids))
    walked, built = RingView(1, members), RingView(1, members)
    for _ in range(INDEX_AFTER_QUERIES + 1):  # past the walk: built answers from its order
        built.successor(members[0] if members else 1, stride)
    for mid in (*members, absent):
        assert walked._walk(mid, stride, 1) == built.successor(mid, stride)
        assert walked._walk(mid, stride, -1) == built.predecessor(mid, stride)


def test_a_view_asked_once_sorts_nothing_and_one_asked_often_builds_its_order() -> None:
    view = RingView(7, tuple(range(1, 24_001)))
    # 24,000 is the last of its class (64 · 375): its successor is the first of the next class.
    assert view.predecessor(12_345, 64) == 12_345 - 64 and view.successor(24_000, 64) == 1
    assert 64 not in view._orders
    for _ in range(INDEX_AFTER_QUERIES):
        view.successor(5, 64)
    assert 64 in view._orders and view.predecessor(12_345, 64) == 12_345 - 64
