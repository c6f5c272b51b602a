"""E1's runs as its tables read them, from the output of an E1 study (`emulator study
scenarios/studies/e1.toml`, e1-seeds20.toml, e1-explore.toml: docs/e1*.json).

A study of E1 names E1's policies as variants, varies `seed` (and may vary
`scheduler.preemption.enabled`), and collects what the tables need beyond whole-run metrics: each
user's dominant and fair share (`pools`), the pooled-cluster bound and the CPU of preempted tasks.
"""

from __future__ import annotations

import os
from typing import Any

NEEDED = ("cpu_utilization_excl_preempted", "preempted_cpu_s", "fair_cpu_bound", "fair_ram_bound", "pools")
METRICS = ("cpu_utilization", "ram_utilization", "preemptions", "fallback_allocations", "refusals",
           "allocations")
# E1's own policy names (the tables' column order); any other variant is a variant of them.
NAMED = ("none", "thesis", "fit", "fit-fair")


class NotE1(ValueError):
    """A study output that lacks what E1's tables need."""


def e1_results(data: dict[str, Any]) -> dict[str, Any]:
    """``data`` as E1's tables take it: ``{"scenario", "seeds", "runs": [...], "variants"}``."""
    if "format" not in data and "runs" in data:
        return data  # already in the tables' form (what this returns)
    if "study" not in data:
        raise NotE1("not the output of `emulator study`: E1's tables read an E1 study's output")
    study, source = data["study"], data["file"]
    lacking = [c for c in NEEDED if c not in study.get("collect", [])]
    lacking += [m for m in METRICS if m not in study.get("metrics", [])]
    if lacking:
        raise NotE1(f"{source}: E1's tables need the study to collect or measure {', '.join(lacking)}")
    runs, seeds = [], []
    for p in data["points"]:
        got = {**p["metrics"], **p["collected"]}
        seed = p["scenario"]["run"]["seed"]
        if seed not in seeds:
            seeds.append(seed)
        run: dict[str, Any] = {
            "policy": p["variant"], "preemption": p["scenario"]["scheduler"]["preemption"]["enabled"],
            "seed": seed, "wall_s": p["wall_s"], **{k: got[k] for k in METRICS + NEEDED if k != "pools"},
        }
        # Lost work as a fraction of window CPU capacity.
        run["preempted_pct"] = got["cpu_utilization"] - got["cpu_utilization_excl_preempted"]
        run["pools"] = {u["name"]: u["dominant_share"] for u in got["pools"]}
        # DRF's fair share of each user in the same run (progressive filling on the pooled cluster).
        run["fair"] = {u["name"]: u["fair_share"] for u in got["pools"]}
        runs.append(run)
    variants = {v["name"]: v.get("set", {}) for v in study.get("variants", []) if v["name"] not in NAMED}
    scenario = os.path.normpath(os.path.join(os.path.dirname(source), study["scenario"]))
    return {"scenario": scenario, "seeds": seeds, "runs": runs, "variants": variants}
