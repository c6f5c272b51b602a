"""A pool whose one child is an operation takes its levels by a short path
(``fair_share._one_leaf_levels``): the fair shares must be the very floats the general path gives,
min shares (oversubscribed too), weights, mixed shapes, frozen operations and nested pools
included."""

from __future__ import annotations

import random

import pytest

from rm.protocol import Resources
from rm.scheduler import fair_share
from rm.scheduler.fair_share import progressive_filling
from rm.state.operations import Operation, OperationSpec, Pool


def _mix(seed: int) -> tuple[Pool, list[Operation]]:
    rng = random.Random(seed)
    root = Pool("root")
    group = Pool("group", weight=2.0, parent=root)  # one-op pools one level down too
    ops: list[Operation] = []
    for i in range(12):
        parent = group if i % 3 == 0 else root
        p = Pool(f"p{i}", weight=rng.choice([0.5, 1.0, 3.0]),
                 min_share=Resources(rng.choice([0.0, 2.0, 9.0]), rng.choice([0.0, 5.0])), parent=parent)
        n_ops = 2 if i == 7 else 1  # and one pool with two operations (the general path)
        for j in range(n_ops):
            demand = Resources(rng.choice([0.5, 1.0, 2.0]), rng.choice([0.5, 2.0, 8.0]))
            spec = OperationSpec(name=f"o{i}.{j}", pool=p.name, demand=demand,
                                 durations=[1.0] * rng.choice([0, 1, 3, 40]),
                                 weight=rng.choice([1.0, 2.0]))
            op = Operation(len(ops) + 1, spec, p, 0.0)
            p.operations.append(op)
            ops.append(op)
    return root, ops


@pytest.mark.parametrize("seed", [1, 2, 3, 4])
def test_one_operation_pools_get_the_general_paths_floats(seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    root, ops = _mix(seed)
    capacity = Resources(32.0, 96.0)  # small enough that a resource saturates (operations freeze)
    short = progressive_filling(root, ops, capacity)
    monkeypatch.setattr(fair_share, "_one_leaf_levels", lambda leaf: None)
    general = progressive_filling(root, ops, capacity)
    assert any(v > 0 for v in short.operations.values())
    assert repr(short) == repr(general)
