"""Packing heuristics on hand-computed vectors and the controller's accept/refuse rule."""

from __future__ import annotations

import math
import random

import msgspec
import pytest

from emulator.scenario.loader import ScenarioError
from rm.protocol import Resources
from rm.scheduler.config import PRESETS, PackingConfig, PackingParams
from rm.scheduler.policies.heuristics import angle, angle_length, drfh, scales, tetris
from rm.scheduler.policies.packing_controller import PackingController
from rm.state.cluster import Cluster
from tests.helpers import RecordingLink, scenario


def params(**kw: object) -> PackingParams:
    base = {
        "heuristic": "angle_length", "warmup_refusals": 0, "window": 15, "max_age_s": 1e9, "k": 0,
        "accept": "at_most_k", "significance": False, "A": 0.05, "R": 1.5,
        "max_consecutive_refusals": None, "normalisation": "node_mean",
    }
    base.update(kw)
    return msgspec.convert(base, PackingParams)


# ---- heuristics ------------------------------------------------------------------------------


def test_heuristics_on_hand_computed_vectors() -> None:
    assert angle(1, 1, 2, 2) == pytest.approx(0.0)
    assert angle(1, 0, 0, 1) == pytest.approx(1.0)
    assert angle(1, 0, 1, 1) == pytest.approx(1 - 1 / math.sqrt(2))
    # angle · ‖F‖/‖D‖ = (1 - 1/√2) · √2 / 1
    assert angle_length(1, 0, 1, 1) == pytest.approx(math.sqrt(2) - 1)
    assert angle_length(1, 2, 3, 6) == pytest.approx(0.0)  # same direction: perfect whatever the size
    # |D2/D1 - F2/F1| = |2/1 - 8/4|, |4 - 1|
    assert drfh(1, 2, 4, 8) == pytest.approx(0.0)
    assert drfh(1, 4, 2, 2) == pytest.approx(3.0)
    assert tetris(1, 2, 3, 4) == pytest.approx(1 / 11)


def test_a_bigger_free_vector_in_the_same_bad_direction_scores_worse_with_length() -> None:
    small, big = angle_length(1, 1, 2, 1), angle_length(1, 1, 8, 4)
    assert angle(1, 1, 2, 1) == pytest.approx(angle(1, 1, 8, 4))
    assert big == pytest.approx(4 * small)


def test_normalisations_divide_by_node_mean_or_cluster_total() -> None:
    cluster = Cluster()
    cluster.add("a", Resources(10, 20), link=RecordingLink(), now=0.0)
    cluster.add("b", Resources(30, 60), link=RecordingLink(), now=0.0)
    assert scales(cluster, "node_mean") == (20, 40)
    assert scales(cluster, "cluster_total") == (40, 80)
    # A common factor on both resources: angle_length is the same under either normalisation.
    d, f = Resources(2, 1), Resources(6, 20)
    values = [
        angle_length(d.cpu / sc, d.ram_gib / sr, f.cpu / sc, f.ram_gib / sr)
        for sc, sr in (scales(cluster, "node_mean"), scales(cluster, "cluster_total"))
    ]
    assert values[0] == pytest.approx(values[1])


# ---- decision rule ---------------------------------------------------------------------------


def feed(ctrl: PackingController, values: list[float], t: float = 0.0) -> list[bool]:
    return [ctrl.decide(t, v) for v in values]


def test_warm_up_refuses_the_first_s_offers_even_perfect_ones() -> None:
    ctrl = PackingController(params(warmup_refusals=3, k=15))
    assert feed(ctrl, [0.0, 0.0, 0.0, 0.0]) == [False, False, False, True]
    assert (ctrl.offers, ctrl.accepted, ctrl.refused) == (4, 1, 3)


def test_window_keeps_only_the_last_n_offers() -> None:
    wide = PackingController(params(window=3, k=0))
    narrow = PackingController(params(window=2, k=0))
    # 0.1 is accepted (empty window), the 0.5s are refused (0.1 beats them).
    assert feed(wide, [0.1, 0.5, 0.5]) == [True, False, False]
    assert feed(narrow, [0.1, 0.5, 0.5]) == [True, False, False]
    # 0.4: the wide window still holds 0.1; the narrow one has forgotten it.
    assert wide.decide(0.0, 0.4) is False
    assert narrow.decide(0.0, 0.4) is True


def test_offers_older_than_max_age_leave_the_window() -> None:
    ctrl = PackingController(params(max_age_s=10.0, k=0))
    assert ctrl.decide(0.0, 0.1) is True
    assert ctrl.decide(5.0, 0.4) is False  # 0.1 (age 5) is better
    assert ctrl.decide(11.0, 0.4) is True  # 0.1 is 11 s old: gone; 0.4 is not better than 0.4


@pytest.mark.parametrize(
    ("old", "better"),
    [
        (0.26, False),  # not below 0.3 - A = 0.25
        (0.21, False),  # below 0.25 but not below 0.3 / R = 0.2
        (0.19, True),  # below both
    ],
)
def test_significance_test_needs_both_margins(old: float, better: bool) -> None:
    ctrl = PackingController(params(significance=True, A=0.05, R=1.5, k=0))
    ctrl.decide(0.0, old)
    assert ctrl.better_count(0.0, 0.3) == int(better)
    assert ctrl.decide(0.0, 0.3) is (not better)


def test_thesis_accepts_at_most_k_better_yt_fewer_than_k() -> None:
    at_most = PackingController(params(k=1, accept="at_most_k"))
    fewer = PackingController(params(k=1, accept="fewer_than_k"))
    for ctrl in (at_most, fewer):
        ctrl.decide(0.0, 0.1)
    assert at_most.decide(0.0, 0.5) is True  # exactly one better offer
    assert fewer.decide(0.0, 0.5) is False


def test_consecutive_refusal_limit_forces_an_acceptance_then_resets() -> None:
    ctrl = PackingController(params(warmup_refusals=100, max_consecutive_refusals=3))
    assert feed(ctrl, [0.5] * 8) == [False, False, False, True, False, False, False, True]
    assert ctrl.forced == 2


@pytest.mark.parametrize(("n", "k"), [(15, 2), (10, 4), (5, 0)])
def test_iid_offers_are_accepted_at_rate_k_plus_1_over_n_plus_1(n: int, k: int) -> None:
    ctrl = PackingController(params(window=n, k=k))
    rng = random.Random(1)
    total = 40_000
    accepted = sum(ctrl.decide(0.0, rng.random()) for _ in range(total))
    assert accepted / total == pytest.approx((k + 1) / (n + 1), abs=0.01)


# ---- presets and configuration ---------------------------------------------------------------


def test_presets_match_thesis_table_4_2_and_yt_defaults() -> None:
    thesis = PackingConfig().resolve()
    assert (thesis.warmup_refusals, thesis.window, thesis.k, thesis.accept) == (5, 15, 2, "at_most_k")
    assert (thesis.A, thesis.R, thesis.max_age_s, thesis.heuristic) == (0.05, 1.5, 1200.0, "angle_length")
    yt = PackingConfig(preset="yt").resolve()
    assert (yt.warmup_refusals, yt.window, yt.k, yt.accept) == (0, 10, 2, "fewer_than_k")
    assert (yt.max_age_s, yt.max_consecutive_refusals, yt.normalisation) == (3600.0, None, "cluster_total")
    assert PRESETS["yt"] == yt


def test_single_parameters_override_a_preset() -> None:
    p = PackingConfig(preset="yt", k=4, heuristic="tetris", max_consecutive_refusals=7).resolve()
    assert (p.k, p.heuristic, p.max_consecutive_refusals, p.window) == (4, "tetris", 7, 10)
    assert PackingConfig(no_refusal_limit=True).resolve().max_consecutive_refusals is None


def test_bad_packing_settings_name_the_field() -> None:
    with pytest.raises(ScenarioError, match=r"scheduler\.packing\.preset"):
        scenario(scheduler={"policy": "packing", "packing": {"preset": "borg"}})
    with pytest.raises(ScenarioError, match=r"scheduler\.packing\.R"):
        scenario(scheduler={"packing": {"R": 0.5}})
    with pytest.raises(ScenarioError, match=r"disabled_pools.*nosuch"):
        scenario(scheduler={"packing": {"disabled_pools": ["nosuch"]}})
