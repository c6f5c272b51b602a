"""E1's fairness bound, one-sided (issue 33): no user loses more than 10% of its no-packing dominant
share (seed means); a user packing raises is not held against it. And lost work beside the thesis's."""

from __future__ import annotations

from typing import Any

from emulator.study.renderers.e1 import headline_table, largest_loss, meets_loss_bound, thesis_lost_work
from tests.system.test_e1_table import run


def data(u1: tuple[float, float], u2: tuple[float, float]) -> dict[str, Any]:
    """No packing: u1 0.10, u2 0.20 on both seeds; `fit` gives u1 and u2 these shares per seed."""
    runs = []
    for pre in (False, True):
        for seed in (1, 2):
            base = run("none", pre, seed, 0.90, 0.90, 0.10)
            base["pools"] = {"u1": 0.10, "u2": 0.20}
            fit = run("fit", pre, seed, 0.94, 0.95, u1[seed - 1])
            fit["pools"] = {"u1": u1[seed - 1], "u2": u2[seed - 1]}
            runs += [base, fit]
    return {"scenario": "x", "seeds": [1, 2], "runs": runs}


def test_a_user_raised_far_above_its_share_meets_the_bound() -> None:
    d = data(u1=(0.15, 0.17), u2=(0.19, 0.19))  # u1 +60%, u2 -5%
    loss = largest_loss(d["runs"], "fit", True)
    assert loss is not None and abs(loss - 0.05) < 1e-9
    assert meets_loss_bound(loss)
    assert "| largest user loss % (bound: 10%) | – | 5.0 (within 10%) |" in headline_table(d)


def test_a_user_losing_more_than_ten_percent_fails_it() -> None:
    d = data(u1=(0.10, 0.10), u2=(0.18, 0.17))  # u2: 0.175 against 0.20, -12.5%
    loss = largest_loss(d["runs"], "fit", True)
    assert loss is not None and abs(loss - 0.125) < 1e-9
    assert meets_loss_bound(loss) is False
    assert "12.5 (over 10%)" in headline_table(d)


def test_lost_work_is_stated_beside_the_thesiss() -> None:
    d = data(u1=(0.10, 0.10), u2=(0.20, 0.20))
    assert thesis_lost_work() == {"without packing": 1.6, "with packing": 2.8}
    row = "| lost work (CPU of preempted tasks) pp | 1.00 ± 0.00 | 1.00 ± 0.00 | 1.6 → 2.8 |"
    assert row in headline_table(d)
