"""Offline bin packing (design.md §3b): each algorithm on hand-checked instances, including the
classic worst cases that approach the lecture's ratios (next-fit 2, first-fit 1.7, FFD 11/9)."""

from __future__ import annotations

from emulator.measure.binpack import ALGORITHMS, best_fit, ffd, first_fit, lower_bound, next_fit, size_bound

ONE = (1.0,)


def test_ffd_worst_case_is_11_over_9() -> None:
    e = 0.01
    items = [(0.5 + e,)] * 6 + [(0.25 + 2 * e,)] * 6 + [(0.25 + e,)] * 6 + [(0.25 - 2 * e,)] * 12
    assert ffd(items, ONE) == 11
    assert lower_bound(items, ONE) == 9 == size_bound(items, ONE)  # OPT: 9 full bins


def test_first_and_best_fit_approach_5_3_on_small_then_large_items() -> None:
    e = 0.001
    items = [(1 / 7 + e,)] * 6 + [(1 / 3 + e,)] * 6 + [(1 / 2 + e,)] * 6
    assert first_fit(items, ONE) == best_fit(items, ONE) == 10
    assert ffd(items, ONE) == 6  # OPT: six bins of {1/7, 1/3, 1/2} + 3ε


def test_next_fit_approaches_2_on_alternating_halves() -> None:
    items = [(0.5,), (0.001,)] * 40
    assert next_fit(items, ONE) == 40
    assert first_fit(items, ONE) == 21 == lower_bound(items, ONE)


def test_two_resources_and_best_fit_picks_the_fullest_bin() -> None:
    cap = (10.0, 10.0)
    assert all(f([(6.0, 1.0), (1.0, 8.0), (3.0, 1.0)], cap) == 1 for f in ALGORITHMS.values())
    # The 2 goes to the first bin with room (first-fit: 5 -> 7, then the last 5 needs a third
    # bin) or to the fullest (best-fit: 8 -> 10, then the 5 joins the other 5).
    items = [(5.0,), (8.0,), (2.0,), (5.0,)]
    assert first_fit(items, (10.0,)) == 3 and best_fit(items, (10.0,)) == 2
    assert next_fit([(6.0, 6.0), (5.0, 1.0), (1.0, 5.0)], cap) == 2
    assert size_bound([(6.0, 6.0), (5.0, 1.0), (1.0, 5.0)], cap) == 2
    assert set(ALGORITHMS) == {"next-fit", "first-fit", "best-fit", "ffd"}
