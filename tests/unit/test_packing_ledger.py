"""The displacement ledger (`ledger_cap`, docs/packing.md "Bounding what packing moves between users"): a task
started on a node where another user was DRF's choice moves its dominant share between the two;
a user whose net received share is over the cap gets no more offers out of turn."""

from __future__ import annotations

from rm.scheduler.config import PackingConfig, SchedulerConfig
from rm.scheduler.policies.displacement import DisplacementLedger
from tests.fake_nodes import FakeNodes


def starts_on_the_big_node(cap: float | None) -> tuple[list[str], int]:
    """The first six tasks started on the big node, and the all-refused fallbacks there."""
    # b's tasks have the node's own shape (the best packer); a's are CPU-heavy and a is DRF's choice
    # (it has nothing yet). Both refuse their warm-up offers, so `fit` falls back to the best packer.
    cfg = SchedulerConfig(policy="packing", packing=PackingConfig(preset="fit", ledger_cap=cap))
    env = FakeNodes(cfg, [(4, 8), (20, 40)])
    env.submit("b", 1, 2, 50, pool="ub")
    env.heartbeat(0)
    env.submit("a", 2, 1, 50, pool="ua")
    before = env.rm.snapshot().policy.fallback_allocations
    env.heartbeat(1)
    names = {op.id: name for name, op in env.ops().items()}
    fallbacks = env.rm.snapshot().policy.fallback_allocations - before
    return [names[op_id] for op_id in env.running[1].values()][:6], fallbacks


def test_without_a_ledger_the_best_packer_takes_every_fallback() -> None:
    assert starts_on_the_big_node(None)[0][:5] == ["b"] * 5


def test_a_user_over_its_allowance_gets_no_offer_out_of_turn_and_its_giver_refuses_no_more() -> None:
    # Cap 0: b's first task out of turn uses its allowance and a's (the giver's) at once: b gets
    # no more offers out of turn, and a accepts what it would refuse, so no more fallbacks.
    starts, fallbacks = starts_on_the_big_node(0.0)
    assert starts[:5] == ["b", "a", "a", "a", "a"]
    assert fallbacks == 1
    # Cap 0.5: each may move up to half of what it started; b and a alternate.
    assert starts_on_the_big_node(0.5)[0][:4] == ["b", "a", "b", "a"]


def test_the_ledger_bounds_what_a_user_receives_and_gives_out_of_turn() -> None:
    ledger = DisplacementLedger(cap=0.25, tau_s=100.0)
    a, b, c = "a", "b", "c"
    for _ in range(3):  # in turn: nothing moves
        ledger.book(b, b, 0.01, now=0.0)
    ledger.book(b, a, 0.01, now=0.0)  # b receives where a came first: 1 of 4 out of turn
    assert ledger.may_receive(b, 0.0)
    ledger.book(b, c, 0.01, now=0.0)  # 2 of 5 > 0.25: no more out of turn
    assert not ledger.may_receive(b, 0.0)
    assert ledger.may_receive(c, 0.0) and ledger.may_refuse(b, 0.0)
    # a and c gave and started nothing: they refuse no more; a user who started enough may.
    assert not ledger.may_refuse(a, 0.0) and not ledger.may_refuse(c, 0.0)
    for _ in range(4):
        ledger.book(a, a, 0.01, now=0.0)
    assert ledger.may_refuse(a, 0.0)  # gave 0.01 of 0.04 started


def test_the_ledger_forgets_with_its_time_constant() -> None:
    ledger = DisplacementLedger(cap=0.1, tau_s=100.0)
    ledger.book("b", "a", 0.01, now=0.0)
    ledger.book("b", "b", 0.01, now=0.0)
    assert not ledger.may_receive("b", 0.0)
    # Net and started decay alike, so the ratio stays until new starts in turn dilute it.
    for t in range(1, 40):
        ledger.book("b", "b", 0.01, now=10.0 * t)
    assert ledger.may_receive("b", 400.0)
