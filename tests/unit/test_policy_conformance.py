"""The conformance suite (tests/policy_conformance.py) over every registered scheduling policy:
the built-ins and any plug-in installed in this environment (entry-point group `hbemu.policies`).
A policy reached through a placement layer or tiers is still the registered class here: the
suite holds the policy itself to the rules."""

from __future__ import annotations

import random
from collections.abc import Iterator
from pathlib import Path

import pytest

from rm.scheduler.config import SchedulerConfig
from rm.scheduler.policies.drf import DRFPolicy, drf_key, start_time
from rm.scheduler.policies.fifo import FIFOPolicy
from rm.scheduler.registry import BUILTIN_POLICIES, load_policy, policies
from rm.state.cluster import NodeRecord
from rm.state.operations import Operation, Pool
from tests.plugin_support import fake_install
from tests.policy_conformance import check_deterministic, check_min_share, check_never_over_allocates

REGISTERED = policies().names()
# A plug-in not built on PolicyBase may leave the claim out: no claim.
CLAIMING = [n for n in REGISTERED if getattr(load_policy(n), "honours_min_share", False)]


def test_every_built_in_is_registered() -> None:
    assert set(BUILTIN_POLICIES) <= set(REGISTERED)


@pytest.mark.parametrize("name", REGISTERED)
@pytest.mark.parametrize("seed", [1, 2])
def test_never_over_allocates_a_node(name: str, seed: int) -> None:
    check_never_over_allocates(SchedulerConfig(policy=name), seed)


@pytest.mark.parametrize("name", REGISTERED)
def test_the_same_events_give_the_same_allocations(name: str) -> None:
    check_deterministic(SchedulerConfig(policy=name), seed=3)


@pytest.mark.parametrize("name", CLAIMING)
def test_min_shares_come_first_where_claimed(name: str) -> None:
    check_min_share(SchedulerConfig(policy=name))


def test_which_built_ins_claim_min_shares() -> None:
    # A change of claim is a change of contract: the suite then holds the policy to it.
    claims = {n for n in BUILTIN_POLICIES if load_policy(n).honours_min_share}
    assert claims == {"drf", "drfh"}


# ---- the suite catches policies that break the rules ------------------------------------------

class ShuffledDRF(DRFPolicy):
    """Orders fairly, then shuffles with an unseeded generator: not reproducible."""

    def candidates(self, node: NodeRecord) -> Iterator[Operation]:
        ops = list(super().candidates(node))
        random.SystemRandom().shuffle(ops)
        return iter(ops)


class NoMinShareDRF(DRFPolicy):
    """Claims min shares but sorts by dominant share alone."""

    def _key(self, e: Pool | Operation) -> tuple[int, float, float, float, tuple[float, int]]:
        _, _, dom, nxt = drf_key(e.usage_cpu, e.usage_ram, e.weight, 0.0, 0.0,
                                 self.cluster.cap_cpu, self.cluster.cap_ram)
        return (1, 0.0, dom, nxt, start_time(e))


class Overfilling(FIFOPolicy):
    """Offers operations whether or not their task fits the node."""

    def candidates(self, node: NodeRecord) -> Iterator[Operation]:
        return (op for op in self.queue if op.pending)


@pytest.fixture
def broken(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake_install(tmp_path, monkeypatch, "broken-policies", {"hbemu.policies": {
        "shuffled": f"{__name__}:ShuffledDRF",
        "no-min-share": f"{__name__}:NoMinShareDRF",
        "overfilling": f"{__name__}:Overfilling",
    }})


@pytest.mark.usefixtures("broken")
def test_the_suite_refuses_a_policy_that_is_not_reproducible() -> None:
    with pytest.raises(AssertionError):
        check_deterministic(SchedulerConfig(policy="shuffled"), seed=3)


@pytest.mark.usefixtures("broken")
def test_the_suite_refuses_a_policy_that_claims_min_shares_it_does_not_honour() -> None:
    assert load_policy("no-min-share").honours_min_share
    with pytest.raises(AssertionError, match="Resources"):
        check_min_share(SchedulerConfig(policy="no-min-share"))


@pytest.mark.usefixtures("broken")
def test_the_suite_refuses_a_policy_that_over_allocates() -> None:
    with pytest.raises(AssertionError):
        check_never_over_allocates(SchedulerConfig(policy="overfilling"), seed=1)
