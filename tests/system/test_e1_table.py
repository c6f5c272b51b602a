"""E1's tables: mean ± sd over seeds, gap closed and user moves against the no-packing run of the
same seed and preemption setting; from a study's output or an `emulator e1` results file alike."""

from __future__ import annotations

from typing import Any

import pytest

from emulator.study.renderers.e1 import _derived, fairness_table, headline_table, markdown_table
from emulator.study.renderers.e1results import METRICS, NEEDED, NotE1, e1_results


def run(policy: str, pre: bool, seed: int, cpu: float, ram: float, u1: float) -> dict[str, Any]:
    return {"policy": policy, "preemption": pre, "seed": seed, "cpu_utilization": cpu, "ram_utilization": ram,
            "cpu_utilization_excl_preempted": cpu - 0.01, "preempted_pct": 0.01, "fair_cpu_bound": 0.96,
            "fair_ram_bound": 0.98, "preemptions": 5, "fallback_allocations": 0,
            "pools": {"u1": u1, "u2": 0.1}}


def data() -> dict[str, Any]:
    runs = []
    for pre in (False, True):
        runs += [run("none", pre, 1, 0.92, 0.92, 0.10), run("none", pre, 2, 0.90, 0.94, 0.10),
                 run("thesis", pre, 1, 0.94, 0.97, 0.11), run("thesis", pre, 2, 0.92, 0.97, 0.12),
                 run("fit", pre, 1, 0.95, 0.97, 0.10), run("fit", pre, 2, 0.93, 0.98, 0.10)]
    return {"scenario": "x", "seeds": [1, 2], "runs": runs}


def test_gap_closed_and_user_move_are_per_seed_against_no_packing() -> None:
    rows = {(r["policy"], r["seed"]): r for r in _derived(data()) if not r["preemption"]}
    # seed 1: gap 0.96 - 0.92 = 4 pp, thesis gains 2 pp -> 50%; seed 2: gap 6 pp, gain 2 pp -> 1/3.
    assert abs(rows[("thesis", 1)]["gap_closed_cpu"] - 0.5) < 1e-9
    assert abs(rows[("thesis", 2)]["gap_closed_cpu"] - 1 / 3) < 1e-9
    assert abs(rows[("thesis", 2)]["user_move_max"] - 0.2) < 1e-9
    assert rows[("fit", 1)]["user_move_max"] == 0.0


def test_table_has_mean_and_sd_and_the_thesis_column() -> None:
    text = markdown_table(data())
    assert "**Preemption off**" in text and "**Preemption on**" in text
    assert "| CPU % | 91.00 ± 1.41 | 93.00 ± 1.41 | 94.00 ± 1.41 |" in text
    assert "92.2 → 96.7 (+4.5 pp)" in text
    # seed 1: fit closes 3 of 4 pp (75%), seed 2 3 of 6 (50%).
    assert "| CPU gap closed % | – | 42 ± 12 | 63 ± 18 |" in text
    assert "| CPU gain pp | – | 2.00 ± 0.00 | 3.00 ± 0.00 | +4.5 |" in text
    # Thesis u1: mean of 0.11 and 0.12 against 0.10 -> +15%; no packing is the same on both seeds.
    assert "| max user move of the seed means % | – | 15.0 | 0.0 | |" in text
    assert "| no packing, seed vs seed: max user move % (noise) | 0.0 |" in text


def test_fairness_against_the_noise_of_the_no_packing_seeds() -> None:
    d = data()
    # No packing differs between seed halves {1} and {2} only in u2: make it so, 0.10 vs 0.12.
    for r in d["runs"]:
        if r["policy"] == "none" and r["seed"] == 2:
            r["pools"] = {"u1": 0.10, "u2": 0.12}
    text = fairness_table(d)
    # Thesis u1: 0.115 against 0.10 -> 15% (one user above 10%); noise: u2 0.10 / 0.12 - 1 -> 16.7%.
    assert "| off | thesis | 2 | 15.0% | 1 | " in text and text.count("16.7% |") == 4
    assert "| on | fit | 2 | " in text


def test_headline_is_preemption_on_with_the_thesis_gains() -> None:
    text = headline_table(data())
    assert "| CPU % | 91.00 ± 1.41 | 93.00 ± 1.41 | 94.00 ± 1.41 | 92.2 → 96.7 |" in text
    assert "+4.5 / +4.9 |" in text





def test_variants_get_their_own_rows() -> None:
    from emulator.study.renderers.e1 import variants_table

    d = data()
    # A variant raising both users by 20%: a raw move of 20% for each, and none net of the rise.
    for pre in (False, True):
        d["runs"] += [{**run("up", pre, s, 0.95, 0.97, 0.12), "pools": {"u1": 0.12, "u2": 0.12}}
                      for s in (1, 2)]
    d["variants"] = {"up": {"scheduler.packing.preset": "fit"}}
    # One that gives u1 +30% and takes 15% from u2: the largest loss is u2's, read one-sided.
    for pre in (False, True):
        d["runs"] += [{**run("shift", pre, s, 0.95, 0.97, 0.13), "pools": {"u1": 0.13, "u2": 0.085}}
                      for s in (1, 2)]
    d["variants"] = {"up": {"scheduler.packing.preset": "fit"}, "shift": {"scheduler.packing.preset": "fit"}}
    text = variants_table(d)
    assert "| on | up | 4.00 ± 1.41 / 4.00 ± 1.41 | " in text
    assert "| 20.0 | 2 | 0.0 | 0 | 0.0 |" in text
    assert "| on | shift | " in text and "| 30.0 | 2 | " in text and "| 15.0 |\n" in text
    assert "| on | the thesis (Table 4.3) | +4.5 / +4.9 |" in text



def test_by_resource_splits_users_by_their_dominant_resource(tmp_path) -> None:
    from emulator.study.renderers.e1 import by_resource_table, dominant_resources

    scenario = tmp_path / "e1.toml"
    scenario.write_text("""
[cluster]
nodes = [{ count = 2, cpu = 10, ram_gib = 30 }]
[run]
duration_s = 60
[[workload.operations]]
name = "a"
pool = "u1"
cpu = 1
ram_gib = 4  # 4 GiB per core > the cluster's 3: RAM
tasks = 1
seconds_mean = 10
[[workload.operations]]
name = "b"
pool = "u2"
cpu = 1
ram_gib = 2
tasks = 1
seconds_mean = 10
""")
    assert dominant_resources(str(scenario)) == {"u1": "ram", "u2": "cpu"}
    d = {**data(), "scenario": str(scenario)}
    text = by_resource_table(d)
    # thesis, preemption off: u1 0.10 -> 0.115 (+15.0%), u2 stays; CPU 0.91 -> 0.93, RAM 0.93 -> 0.97.
    assert "| off | thesis | +2.2 | +4.3 | +15.0 | +0.0 | 15.0 | " in text
    assert "| off | none | | | | | | " in text


def test_fair_share_table_measures_each_policy_against_drf_fair_share() -> None:
    from emulator.study.renderers.e1 import fair_share_table

    d = data()
    for r in d["runs"]:
        r["fair"] = {"u1": 0.10, "u2": 0.10}
    # Thesis u1 at 0.115 on the seed mean, 15% above its fair share; u2 at 0.1 on it.
    for r in d["runs"]:
        if r["policy"] == "none" and r["preemption"]:
            r["fair"] = {"u1": 0.125, "u2": 0.10}  # no packing leaves u1 20% below its fair share
    del d["runs"][-1]["fair"]  # fit with preemption on: one run without fair shares -> no row
    text = fair_share_table(d)
    assert "| off | none | 0.0 | 0 | 0 | 0.0 |" in text
    assert "| off | thesis | 15.0 | 1 | 0 | 7.5 |" in text
    assert "| on | none | 20.0 | 0 | 1 | 10.0 |" in text
    assert "| on | fit |" not in text


def study_output(d: dict[str, Any]) -> dict[str, Any]:
    """``d``'s runs as `emulator study` writes them: a point per run, E1's policies as variants."""
    names = list(dict.fromkeys(r["policy"] for r in d["runs"]))
    points = []
    for r in d["runs"]:
        metrics = {k: r[k] for k in METRICS if k in r}
        collected = {k: r[k] for k in NEEDED if k != "pools"}
        collected["pools"] = [{"name": n, "dominant_share": v, "fair_share": r.get("fair", {}).get(n)}
                              for n, v in r["pools"].items()]
        scenario = {"run": {"seed": r["seed"]}, "scheduler": {"preemption": {"enabled": r["preemption"]}}}
        points.append({"key": f"{r['policy']}|{r['preemption']}|{r['seed']}", "variant": r["policy"],
                       "coords": {"seed": r["seed"]}, "metrics": metrics, "collected": collected,
                       "wall_s": 1.0, "scenario": scenario})
    study = {"scenario": "../e1-faithful.toml", "metrics": list(METRICS), "collect": list(NEEDED),
             "variants": [{"name": n, "set": {}} for n in names]}
    return {"format": "hbemu-study/1", "file": "scenarios/studies/e1.toml", "study": study, "points": points}


def test_a_study_output_renders_as_the_runs_it_holds() -> None:
    d = data()
    for r in d["runs"]:
        r.update(preempted_cpu_s=1.0, refusals=0, allocations=10, ram_utilization=r["ram_utilization"])
    out = study_output(d)
    assert e1_results(out)["scenario"] == "scenarios/e1-faithful.toml"
    assert e1_results(out)["seeds"] == [1, 2]
    for table in (markdown_table, headline_table, fairness_table):
        assert table(out) == table(d)
    # A study that does not collect what the tables need: said, with the study file named.
    out["study"]["collect"] = ["pools"]
    with pytest.raises(NotE1, match=r"scenarios/studies/e1\.toml: E1's tables need the study to collect "
                       r"or measure cpu_utilization_excl_preempted, preempted_cpu_s, fair_cpu_bound"):
        markdown_table(out)
