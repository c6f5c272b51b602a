"""Fair shares computed without the root's whole curve when the demand fits with room to spare
(``_build_root``) are those of the whole curve, to the last bit, at every distance from full."""

from __future__ import annotations

import random

import pytest

from rm.protocol import Resources
from rm.scheduler import fair_share as fs
from rm.state.operations import Operation, OperationSpec, Pool


def _workload(rng: random.Random) -> tuple[Pool, list[Operation], Resources]:
    root = Pool("root")
    pools = [root]
    for i in range(rng.randint(1, 7)):
        mins = Resources(rng.choice([0, 0, 1, 2.5]), rng.choice([0, 0, 3]))
        pools.append(Pool(f"p{i}", rng.choice([0.5, 1.0, 2.0, 3.0]), mins, rng.choice(pools),
                          max_cpu=rng.choice([None, None, None, 9.0])))
    ops = []
    for j in range(rng.randint(1, 12)):
        pool = rng.choice(pools[1:] if len(pools) > 1 and rng.random() < 0.8 else pools)
        spec = OperationSpec(name=f"o{j}", pool=pool.name, weight=rng.choice([1.0, 1.0, 0.7, 2.0]),
                             demand=Resources(rng.choice([0.5, 1, 2, 3]), rng.choice([0.25, 1, 2, 6])),
                             durations=[1.0] * rng.randint(1, 30))
        o = Operation(j, spec, pool, 0.0)
        pool.operations.append(o)
        for _ in range(rng.randint(0, o.total)):
            o.take_task(0.0)
        ops.append(o)
    # The cluster at a chosen distance from the demand's size on its tighter resource: well
    # clear of it, within and at the shortcut's margin, exactly full, and short of it.
    cpu = sum(o.demand.cpu * (o.running + len(o.pending)) for o in ops)
    ram = sum(o.demand.ram_gib * (o.running + len(o.pending)) for o in ops)
    room = rng.choice([2.0, 1.2, 1.0 + 2e-6, 1.0 + 1e-6, 1.0 + 1e-9, 1.0, 0.999, 0.5])
    other = rng.choice([1.0, 1.5, 4.0])
    if rng.random() < 0.5:
        return root, ops, Resources(cpu * room, ram * room * other)
    return root, ops, Resources(cpu * room * other, ram * room)


def test_the_roots_last_segment_gives_the_shares_of_its_whole_curve(monkeypatch: pytest.MonkeyPatch) -> None:
    rng = random.Random(3)
    cases = [_workload(rng) for _ in range(600)]
    sums = [0]
    sum_at_level = fs._sum_at_level

    def counted(kids: list[fs._Kid], level: float) -> tuple[float, float]:
        sums[0] += 1
        return sum_at_level(kids, level)

    monkeypatch.setattr(fs, "_sum_at_level", counted)
    fast = [fs.progressive_filling(*case) for case in cases]
    fast_sums, sums[0] = sums[0], 0
    monkeypatch.setattr(fs, "_build_root", fs._build)  # the root's whole curve, as any pool's
    for case, got in zip(cases, fast, strict=True):
        assert got == fs.progressive_filling(*case), case[1]
    unsaturated = sum(1 for f in fast if max(f.utilization.cpu, f.utilization.ram_gib) < 1.0 - fs._ROOM)
    assert unsaturated > 150 and len(cases) - unsaturated > 150
    assert fast_sums < 0.95 * sums[0]  # the shortcut was taken
