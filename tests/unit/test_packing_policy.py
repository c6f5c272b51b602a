"""Refusal-based packing inside the RM: offers in fairness order, fallback, per-pool switch, and
seed 000's two-server example, driven message by message on a hand-moved virtual clock."""

from __future__ import annotations

import random

import pytest

from rm.scheduler.config import PackingConfig, SchedulerConfig
from rm.scheduler.policy import OfferCounts
from tests.fake_nodes import FakeNodes


def packing(**kw: object) -> SchedulerConfig:
    return SchedulerConfig(policy="packing", packing=PackingConfig(**kw))  # type: ignore[arg-type]


def test_all_refuse_starts_one_task_of_the_neediest_and_ends_the_update() -> None:
    env = FakeNodes(packing(), [(10, 10)])
    env.submit("a", 1, 1, 50)
    env.submit("b", 1, 1, 50)
    # Warm-up (s = 5): both refuse their first offers -> fallback, one task of the neediest, whose
    # offer then counts as a forced acceptance, not a refusal.
    assert env.heartbeat(0) == 1
    stats = env.rm.snapshot().policy
    assert (stats.refusals, stats.fallback_allocations) == (1, 1)
    assert env.ops()["a"].running == 1
    # The remaining resources are offered at the next heartbeat; b is the neediest now.
    assert env.heartbeat(0) == 1
    assert env.ops()["b"].running == 1
    # Each operation recorded every offer on this node: a refused b's fallback offer.
    offers = env.rm.snapshot().policy.by_group["a"]
    assert (offers.offers, offers.accepted, offers.refused) == (2, 1, 1)


def test_the_fallback_ends_the_run_of_refusals() -> None:
    # A lone operation in warm-up refuses every offer; each fallback starts one of its tasks. With a
    # limit of 2 refusals in a row, it must not be forced to accept: every fallback ended its run.
    env = FakeNodes(packing(warmup_refusals=10, max_consecutive_refusals=2), [(10, 10)])
    env.submit("a", 1, 1, 50)
    launched = [env.heartbeat(0) for _ in range(5)]
    assert launched == [1, 1, 1, 1, 1]
    stats = env.rm.snapshot().policy
    assert (stats.refusals, stats.fallback_allocations) == (0, 5)
    assert stats.by_group["a"] == OfferCounts(offers=5, accepted=5, refused=0)


def test_after_warm_up_an_acceptance_restarts_the_offers_on_the_rest_of_the_node() -> None:
    env = FakeNodes(packing(warmup_refusals=0, k=15), [(10, 10)])
    env.submit("a", 1, 1, 50)
    env.submit("b", 1, 1, 50)
    assert env.heartbeat(0) == 10  # k = n: everyone always accepts -> plain DRF alternation
    ops = env.ops()
    assert (ops["a"].running, ops["b"].running) == (5, 5)
    assert env.rm.snapshot().policy.refusals == 0


def test_packing_can_be_switched_off_per_pool() -> None:
    env = FakeNodes(packing(disabled_pools=["prod"]), [(10, 10)])
    env.submit("batch", 1, 1, 50, pool="batch")
    env.submit("service", 1, 1, 50, pool="prod")
    assert env.heartbeat(0) == 10
    # Batch refused its warm-up offers and each went on to the production operation, which takes
    # every offer without a controller: no node update ended in the fallback.
    stats = env.rm.snapshot().policy
    assert stats.by_group["service"] == OfferCounts(0, 0, 0)
    assert stats.by_group["batch"].refused == 5
    assert stats.fallback_allocations == 0
    assert env.ops()["service"].running >= 5


def test_offers_that_do_not_fit_are_not_recorded() -> None:
    env = FakeNodes(packing(), [(4, 4)])
    env.submit("huge", 8, 8, 5)
    env.submit("small", 1, 1, 5)
    for _ in range(3):
        env.heartbeat(0)
    assert env.rm.snapshot().policy.by_group["huge"] == OfferCounts(0, 0, 0)
    assert env.rm.snapshot().policy.by_group["small"].offers >= 1


def two_server_run(scheduler: SchedulerConfig, steps: int, seed: int = 3) -> tuple[list, FakeNodes]:
    """Seed 000's example: two servers (20, 20); type A <2, 1> (10% cpu, 5% ram), type B <1, 2>.

    A fills server 0 before B arrives and takes server 1, so both start fragmented; from then on
    random tasks finish and are replaced, and every node also heartbeats periodically."""
    env = FakeNodes(scheduler, [(20, 20), (20, 20)])
    env.submit("A", 2, 1, 100_000)
    env.heartbeat(0)
    env.submit("B", 1, 2, 100_000)
    env.heartbeat(1)
    rng = random.Random(seed)
    trace = []
    for step in range(steps):
        env.clock.set(float(step))
        i = rng.randrange(2)
        if env.running[i]:
            env.heartbeat(i, finished=rng.choice(sorted(env.running[i])))
        env.heartbeat(1 - i)
        trace.append(env.utilisation())
    return trace, env


@pytest.mark.parametrize("preset", ["thesis", "yt"])
def test_two_server_example_drf_stays_fragmented_packing_converges_to_the_mix(
    preset: str
) -> None:
    drf_trace, _ = two_server_run(SchedulerConfig(policy="drf"), 1500)
    pack_trace, pack = two_server_run(packing(preset=preset), 1500)
    # Plain DRF: one server all A, the other all B, 75% / 75% for good.
    assert drf_trace[0] == pytest.approx((0.75, 0.75))
    assert all(u == pytest.approx((0.75, 0.75)) for u in drf_trace[-500:])
    # Packing: the mixed allocation (7 A + 6 B per server: 100% cpu, 95% ram) or better.
    tail = pack_trace[-500:]
    cpu = sum(u[0] for u in tail) / len(tail)
    ram = sum(u[1] for u in tail) / len(tail)
    assert cpu + ram >= 1.95 - 0.02
    assert min(cpu, ram) >= 0.93
    ops = pack.ops()
    a, b = ops["A"], ops["B"]
    # Still fair: dominant shares within one task per server (7 A + 6 B is 0.70 vs 0.60).
    assert abs(a.usage.cpu / 40 - b.usage.ram_gib / 40) <= 0.1 + 1e-9
