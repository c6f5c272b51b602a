"""Our packing preset `fit` (issue 14, docs/packing.md "Beyond the thesis"): the thesis's rule, but
when every candidate refuses a node the best-packing one starts and the offers go on."""

from __future__ import annotations

from emulator.harness.runner import run_blocking
from emulator.results.summary import build_summary
from emulator.scenario.loader import scenario_from_dict
from rm.scheduler.config import PackingConfig, SchedulerConfig
from tests.fake_nodes import FakeNodes
from tests.system.test_baselines import small_scenario


def test_fit_is_a_preset_beside_thesis_and_yt() -> None:
    fit = PackingConfig(preset="fit").resolve()
    thesis = PackingConfig(preset="thesis").resolve()
    assert fit.all_refused == "best_continue"
    assert thesis.all_refused == "neediest_stop"
    assert PackingConfig(preset="yt").resolve().all_refused == "neediest_stop"
    # The thesis's heuristic and test, pickier: no better offer among the last 60.
    assert (fit.heuristic, fit.significance, fit.warmup_refusals) == (
        thesis.heuristic, thesis.significance, thesis.warmup_refusals)
    assert (fit.window, fit.k) == (60, 0)


def test_all_refused_starts_the_best_packer_and_the_update_goes_on() -> None:
    # Node 10 cores / 20 GiB; a's tasks are CPU-heavy, b's have the node's own shape. a is the
    # neediest (submitted first); both refuse their warm-up offers.
    env = FakeNodes(SchedulerConfig(policy="packing", packing=PackingConfig(preset="fit")), [(10, 20)])
    env.submit("a", 2, 1, 50)
    env.submit("b", 1, 2, 50)
    launched = env.heartbeat(0)
    ops = env.ops()
    assert launched > 1  # the update did not end at the first fallback
    first = next(iter(env.running[0].values()))
    assert first == ops["b"].id  # the first fallback went to the best packer, not the neediest
    stats = env.rm.snapshot().policy
    assert stats.fallback_allocations >= 1
    # The thesis's rule: one task of the neediest, and the update ends.
    env = FakeNodes(SchedulerConfig(policy="packing", packing=PackingConfig(preset="thesis")), [(10, 20)])
    env.submit("a", 2, 1, 50)
    env.submit("b", 1, 2, 50)
    assert env.heartbeat(0) == 1
    assert (env.ops()["a"].running, env.ops()["b"].running) == (1, 0)


def test_fit_runs_from_a_scenario_and_is_deterministic() -> None:
    cfg = small_scenario("packing", packing={"preset": "fit"})
    a = build_summary(run_blocking(scenario_from_dict(cfg, "<test>")))
    b = build_summary(run_blocking(scenario_from_dict(small_scenario("packing", packing={"preset": "fit"}),
                                                      "<test>")))
    keys = ("allocations", "refusals", "fallback_allocations", "cpu_utilization", "ram_utilization")
    assert [a[k] for k in keys] == [b[k] for k in keys]
    assert a["refusals"] > 0 and a["fallback_allocations"] > 0


def test_fallback_fraction_limits_the_choice_to_the_neediest_refusers() -> None:
    cfg = PackingConfig(preset="fit", fallback_fraction=0.5)
    env = FakeNodes(SchedulerConfig(policy="packing", packing=cfg), [(10, 20)])
    env.submit("a", 2, 1, 50)
    env.submit("b", 1, 2, 50)
    env.heartbeat(0)
    first = next(iter(env.running[0].values()))
    assert first == env.ops()["a"].id  # only the first half (a) of the two refusers was eligible
