"""The versioned ring and its deltas (ringmon.membership)."""

from __future__ import annotations

import random

import msgspec
import pytest

from ringmon.membership import Membership, RingView, ViewCache, combine, decode_ids, encode_ids
from ringmon.protocol import RingDelta


def test_gap_encoding_round_trips_and_is_small() -> None:
    ids = [7490, 3, 17, 4000, 18]
    assert decode_ids(encode_ids(ids)) == sorted(ids)
    spread = list(range(20, 7500, 20))  # 375 ids, one every 20
    assert len(msgspec.msgpack.encode(encode_ids(spread))) < 400  # ~1 byte per id


def test_flush_batches_changes_into_one_versioned_delta() -> None:
    m = Membership()
    for i in (1, 2, 3, 5):
        m.insert(i)
    d1 = m.flush()
    assert d1 is not None and (d1.base_version, d1.version) == (0, 1)
    assert m.flush() is None  # nothing pending
    m.remove(2)
    m.remove(5)
    m.insert(4)
    d2 = m.flush()
    assert d2 is not None and (d2.base_version, d2.version) == (1, 2)
    assert decode_ids(d2.removed) == [2, 5] and decode_ids(d2.added) == [4]
    view = RingView(0, ()).apply(d1).apply(d2)
    assert view.ids == (1, 3, 4) == m.published.ids


def test_removed_and_reinserted_in_one_batch_is_sent_as_both() -> None:
    m = Membership()
    m.insert(1)
    m.insert(2)
    m.flush()
    m.remove(2)
    m.insert(2)  # a node lost and a new one given the same id before the flush
    d = m.flush()
    assert d is not None and decode_ids(d.removed) == [2] and decode_ids(d.added) == [2]
    assert RingView(1, (1, 2)).apply(d).ids == (1, 2)


def test_a_delta_for_another_base_does_not_apply() -> None:
    with pytest.raises(ValueError, match="does not apply"):
        RingView(3, (1, 2)).apply(RingDelta(base_version=2, version=3, added=(), removed=()))


def test_view_cache_shares_one_result_per_version() -> None:
    cache = ViewCache()
    base = RingView(1, (1, 2, 3))
    d = RingDelta(base_version=1, version=2, added=(), removed=encode_ids([2]))
    assert cache.apply(base, d) is cache.apply(base, d)


def test_stride_ring_watches_a_block_from_outside() -> None:
    m = Membership(strides=(1, 64))
    for i in range(1, 501):
        m.insert(i)
    # In the id ring the watcher of 100 is 101; in the stride ring it is 164.
    assert m.watchers(100) == [101, 164]
    block = set(range(200, 220))
    for mid in block:
        assert any(w not in block for w in m.watchers(mid))
    view = RingView(1, tuple(range(1, 501)))
    assert view.successor(100, 64) == 164 and view.predecessor(164, 64) == 100
    assert view.successor(500, 1) == 1  # the ring wraps


def test_insert_twice_and_remove_absent_are_errors() -> None:
    m = Membership()
    m.insert(1)
    with pytest.raises(ValueError):
        m.insert(1)
    with pytest.raises(ValueError):
        m.remove(9)


def test_combined_deltas_equal_the_deltas_applied_in_turn() -> None:
    import random

    rng = random.Random(7)
    m = Membership(strides=(1, 4))
    for i in range(1, 41):
        m.insert(i, f"h{i % 3}")
    base = RingView(0, ()).apply(m.flush())  # type: ignore[arg-type]
    deltas: list[RingDelta] = []
    for _ in range(12):
        for _ in range(rng.randint(1, 5)):
            mid = rng.randint(1, 50)
            if mid in m:
                m.remove(mid)
            else:
                m.insert(mid, f"h{mid % 4}")
        if rng.random() < 0.5:  # lost and given the same id again within one batch
            mid = rng.choice([i for i in range(1, 51) if i in m])
            m.remove(mid)
            m.insert(mid, "h9")
        d = m.flush()
        assert d is not None
        deltas.append(d)
    for k in range(len(deltas)):
        start = base
        for d in deltas[:k]:
            start = start.apply(d)
        one = combine(deltas[k:])
        got = start.apply(one)
        assert got.ids == m.published.ids == tuple(sorted(m.published.members))
        assert all(got.endpoint(i) == m.published.endpoint(i) for i in got.ids)
        # An id of the start view that got a new life is both removed and added (nodes learn it is new).
        readded = {i for d in deltas[k:] for i in decode_ids(d.removed)} & set(start.ids) & set(got.ids)
        assert readded <= set(decode_ids(one.removed)) & set(decode_ids(one.added))


def test_neighbours_are_the_watchers_and_watched_of_changed_ids_in_every_stride() -> None:
    m = Membership(strides=(1, 64))
    for i in range(1, 201):
        m.insert(i)
    m.flush()
    m.remove(10)
    m.insert(300)
    # 10's gap: 9 and 11 (id ring), 137 and 74 (stride 64: ..., 137, 10, 74, ...); 300: 1 and 200
    # (id ring), 172 and 45 (300 = 44 mod 64: ..., 172, 300, 45, ...).
    assert m.neighbours([10, 300]) == {9, 11, 137, 74, 200, 1, 172, 45}


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_joins_kept_as_they_come_give_the_delta_a_pass_over_them_gives(seed: int) -> None:
    """Ascending joins (a start-up storm) are kept ready for the delta; anything else (an id
    below the last, a pending join leaving) falls back to sorting them: the same deltas."""
    rng = random.Random(seed)
    kept, sorted_ = Membership((1, 8)), Membership((1, 8))
    next_id = 1
    for batch in range(12):
        storm = batch % 3 == 0  # ascending joins only, as at start-up
        for _ in range(rng.randint(1, 40)):
            members = kept.published.ids
            if storm or not members or rng.random() < 0.6:
                free = [i for i in range(1, next_id) if i not in kept]
                mid = next_id if storm or not free or rng.random() < 0.5 else rng.choice(free)
                next_id = max(next_id, mid + 1)
                for m in (kept, sorted_):
                    m.insert(mid, f"h{mid % 3}:1")
            else:
                mid = rng.choice([i for i in range(1, next_id) if i in kept])
                for m in (kept, sorted_):
                    m.remove(mid)
        sorted_._joins = None  # white box: the other way to the same delta
        if storm:
            assert kept._joins is not None
        a, b = kept.flush(), sorted_.flush()
        assert a == b and kept.flushed == sorted_.flushed
        assert kept.published.ring() == sorted_.published.ring()
