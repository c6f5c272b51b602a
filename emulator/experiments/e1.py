"""``emulator e1``: the faithful E1 (thesis Tables 4.1-4.3; issue 14) -- 3 seeds x {no packing,
thesis packing, our `fit` packing} x {preemption off, on} on a fixed node list, in virtual time.
``--policies`` / ``--preemption`` choose what runs (e.g. our `fit-fair`), ``--merge`` adds the runs
to an existing results file, ``--table`` prints the markdown table from the JSON (the tables:
``e1tables``).

Preemption runs under a named rule (``--preemption-rule``): ``yt-thesis`` (the scenario's
calibrated settings, lost work as the CPU preempted tasks used; issue 33) or ``reconstruction``
(the rule before issue 33).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import tomllib
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

from emulator.experiments.e1study import check_alone, e1_grid
from emulator.experiments.e1tables import (
    DEFAULT_POLICIES,
    POLICIES,
    PREEMPTION,
    NoBaseline,
    beside_thesis,
    markdown_table,
)
from emulator.harness.runner import run_blocking
from emulator.results.summary import write_results
from emulator.scenario.loader import ScenarioError, load_scenario

SEEDS = (1, 2, 3)
# Named preemption rules: scenario overrides on top of the file's `[scheduler.preemption]`.
PREEMPTION_RULES: dict[str, dict[str, Any]] = {
    # As the thesis's YT ran it: the scenario file's settings (its tolerance calibrated so that no
    # packing loses about the thesis's 1.6 pp), lost work the CPU preempted tasks used.
    "yt-thesis": {"scheduler.preemption.lost_work": "consumed"},
    # The rule before issue 33: YT's default tolerance and timeout, lost work counted as reserved.
    "reconstruction": {"scheduler.preemption.tolerance": 0.8,
                       "scheduler.preemption.starvation_timeout_s": 30.0,
                       "scheduler.preemption.lost_work": "reserved"},
}
DEFAULT_PREEMPTION_RULE = "yt-thesis"
KEYS = ("cpu_utilization", "ram_utilization", "cpu_utilization_excl_preempted", "fair_cpu_bound",
        "fair_ram_bound", "preemptions", "preempted_cpu_s", "fallback_allocations", "refusals",
        "allocations")


def _one(path: str, policy: str, preemption: bool, seed: int, out: str,
         settings: dict[str, Any], rule: str = DEFAULT_PREEMPTION_RULE) -> dict[str, Any]:
    os.nice(19)
    overrides = {**settings, **PREEMPTION_RULES[rule], "scheduler.preemption.enabled": preemption,
                 "run.seed": seed}
    sc = load_scenario(path, overrides)
    t0 = time.monotonic()
    outcome = run_blocking(sc, None)
    wall = time.monotonic() - t0
    run_dir = Path(out) / f"{policy}-{'pre' if preemption else 'nopre'}-s{seed}"
    summary = write_results(outcome, run_dir)
    row = {"policy": policy, "preemption": preemption, "seed": seed, "wall_s": round(wall, 1)}
    row.update({k: summary.get(k) for k in KEYS})
    # Lost work as a fraction of window CPU capacity.
    row["preempted_pct"] = summary["cpu_utilization"] - summary["cpu_utilization_excl_preempted"]
    row["pools"] = {p["name"]: p["dominant_share"] for p in summary["pools"]}
    # DRF's fair share of each user in the same run (progressive filling on the pooled cluster).
    row["fair"] = {p["name"]: p["fair_share"] for p in summary["pools"]}
    return row


def run_e1(
    path: Path, out: Path, seeds: tuple[int, ...], jobs: int, say: Callable[[str], None],
    policies: tuple[str, ...] = DEFAULT_POLICIES, preemption: tuple[bool, ...] = PREEMPTION,
    variants: dict[str, dict[str, Any]] | None = None, rule: str = DEFAULT_PREEMPTION_RULE,
) -> dict[str, Any]:
    """``variants``: more packing policies, by name, as scenario overrides (``--variant``);
    ``rule``: the named preemption rule (PREEMPTION_RULES)."""
    variants = variants or {}
    settings = {**{p: POLICIES[p] for p in policies}, **variants}
    if not settings:
        raise ScenarioError("nothing to run: --policies is empty and no --variant is given")
    for overrides in settings.values():
        # Bad input fails here, before any worker starts.
        load_scenario(path, {**overrides, **PREEMPTION_RULES[rule]})
    out.mkdir(parents=True, exist_ok=True)
    cases = [(p, pre, s) for pre in preemption for p in settings for s in seeds]
    rows: list[dict[str, Any]] = []
    with ProcessPoolExecutor(max_workers=jobs) as pool:
        futures = [pool.submit(_one, str(path), p, pre, s, str(out), settings[p], rule)
                   for p, pre, s in cases]
        for fut in futures:
            row = fut.result()
            say(f"{row['policy']:>8} preemption {'on ' if row['preemption'] else 'off'} seed {row['seed']}: "
                f"CPU {100 * row['cpu_utilization']:.2f}% RAM {100 * row['ram_utilization']:.2f}% "
                f"({row['wall_s']} s)")
            rows.append(row)
    result: dict[str, Any] = {"scenario": str(path), "seeds": list(seeds), "preemption_rule": rule,
                              "runs": rows}
    if variants:
        result["variants"] = variants
    return result


def merge(old: dict[str, Any], new: dict[str, Any]) -> dict[str, Any]:
    """``new``'s runs added to ``old``'s (a run of the same policy, preemption and seed replaced):
    a partial run (``--policies``) completes a results file without re-running the rest."""
    if old.get("scenario") != new["scenario"]:
        raise ValueError(f"merging runs of {new['scenario']} into results of {old.get('scenario')}")
    # Files from before issue 33 ran the earlier rule.
    if old.get("preemption_rule", "reconstruction") != new.get("preemption_rule", "reconstruction"):
        raise ValueError(f"merging runs of preemption rule {new.get('preemption_rule')} into results "
                         f"of rule {old.get('preemption_rule', 'reconstruction')}")
    fresh = {(r["policy"], r["preemption"], r["seed"]) for r in new["runs"]}
    runs = [r for r in old["runs"] if (r["policy"], r["preemption"], r["seed"]) not in fresh]
    seeds = list(old["seeds"]) + [s for s in new["seeds"] if s not in old["seeds"]]
    merged = {"scenario": new["scenario"], "seeds": seeds, "runs": runs + new["runs"]}
    if "preemption_rule" in new:
        merged["preemption_rule"] = new["preemption_rule"]
    variants = {**old.get("variants", {}), **new.get("variants", {})}
    if variants:
        merged["variants"] = variants
    return merged


def _seeds(text: str) -> tuple[int, ...]:
    try:
        seeds = tuple(int(s) for s in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated whole numbers, got {text!r}") from None
    if len(set(seeds)) != len(seeds):
        raise argparse.ArgumentTypeError(f"expected distinct seeds, got {text!r}")
    return seeds


def _jobs(text: str) -> int:
    if not text.isdigit() or not 1 <= int(text) <= 64:
        raise argparse.ArgumentTypeError(f"expected a whole number from 1 to 64, got {text!r}")
    return int(text)


def _policies(text: str) -> tuple[str, ...]:
    if not text.strip():
        return ()  # only the --variant policies (added with --merge to a file that has the rest)
    names = tuple(n.strip() for n in text.split(","))
    bad = [n for n in names if n not in POLICIES]
    if bad or len(set(names)) != len(names):
        raise argparse.ArgumentTypeError(
            f"expected distinct names from {', '.join(POLICIES)}, comma-separated, got {text!r}")
    return names


PREEMPTION_CHOICES = {"off": (False,), "on": (True,), "both": PREEMPTION}


def _variant(text: str) -> tuple[str, dict[str, Any]]:
    """``NAME=PRESET[,field=value...]``: a packing policy by preset and `scheduler.packing` fields."""
    name, sep, spec = text.partition("=")
    parts = [p.strip() for p in spec.split(",")] if sep else []
    if not name.strip() or not parts or not parts[0] or name.strip() in POLICIES:
        raise argparse.ArgumentTypeError(
            "expected NAME=PRESET[,field=value...] with a new NAME, e.g. fit-w60=fit,window=60; "
            f"got {text!r}")
    overrides: dict[str, Any] = {"scheduler.policy": "packing", "scheduler.packing.preset": parts[0]}
    for part in parts[1:]:
        key, eq, raw = part.partition("=")
        if not eq or not key.strip():
            raise argparse.ArgumentTypeError(f"--variant {text!r}: {part!r} is not field=value")
        try:
            value: Any = tomllib.loads(f"v = {raw}")["v"]
        except tomllib.TOMLDecodeError:
            value = raw
        overrides[f"scheduler.packing.{key.strip()}"] = value
    return name.strip(), overrides


def cmd_e1(args: argparse.Namespace) -> int:
    if args.table:
        try:
            text = markdown_table(json.loads(Path(args.table).read_text(encoding="utf-8")))
        except NoBaseline as err:
            print(f"error: {args.table}: {err}", file=sys.stderr)
            return 2
        except (OSError, ValueError, KeyError, TypeError, AttributeError) as err:
            why = f"{type(err).__name__}: {err}"
            print(f"error: {args.table}: not an e1 results file ({why})", file=sys.stderr)
            return 2
        print(text, end="")
        return 0
    dest = Path(args.json)
    old: dict[str, Any] | None = None
    if args.merge and dest.exists():
        try:
            old = json.loads(dest.read_text(encoding="utf-8"))
        except (OSError, ValueError) as err:
            print(f"error: {dest}: not an e1 results file ({type(err).__name__}: {err})", file=sys.stderr)
            return 2
    try:
        if args.study:  # the runs a study file names (emulator/experiments/e1study.py)
            check_alone(args)
            grid = e1_grid(Path(args.study), POLICIES)
            data = run_e1(grid.scenario, Path(args.out), grid.seeds, args.jobs, print, grid.policies,
                          grid.preemption, grid.variants, args.preemption_rule)
        else:
            data = run_e1(Path(args.file), Path(args.out), args.seeds or SEEDS, args.jobs, print,
                          DEFAULT_POLICIES if args.policies is None else args.policies,
                          PREEMPTION_CHOICES[args.preemption],
                          dict(args.variant or []), args.preemption_rule)
    except ScenarioError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    if old is not None:
        try:
            data = merge(old, data)
        except (ValueError, KeyError, TypeError) as err:
            print(f"error: {dest}: cannot merge ({type(err).__name__}: {err})", file=sys.stderr)
            return 2
    try:
        data["beside_thesis"] = beside_thesis(data)
    except NoBaseline:
        data.pop("beside_thesis", None)  # a partial file: the summary comes with the no-packing runs
    dest.parent.mkdir(parents=True, exist_ok=True)
    dest.write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")
    try:
        print(markdown_table(data), end="")
    except NoBaseline as err:
        print(f"no table: {err}")
    print(f"results in {dest} (runs in {args.out}/)")
    return 0


def add_command(sub: Any) -> None:
    s = sub.add_parser("e1", help="faithful E1: 3 seeds x packing policies x preemption, mean ± sd")
    s.add_argument("file", nargs="?", default="scenarios/e1-faithful.toml", help="the E1 scenario")
    s.add_argument("--out", default="runs/e1", help="run directories (default runs/e1)")
    s.add_argument("--json", default="docs/e1.json", help="results file (default docs/e1.json)")
    s.add_argument("--seeds", type=_seeds, help="comma-separated seeds (default 1,2,3)")
    s.add_argument("--jobs", type=_jobs, default=2, help="runs at a time (default 2)")
    s.add_argument("--policies", type=_policies,
                   help=f"comma-separated, from {','.join(POLICIES)} (default {','.join(DEFAULT_POLICIES)})")
    s.add_argument("--variant", type=_variant, action="append", metavar="NAME=PRESET[,field=value...]",
                   help="also run this packing policy (repeatable), e.g. fit-w60=fit,window=60")
    s.add_argument("--preemption", choices=list(PREEMPTION_CHOICES), default="both",
                   help="preemption settings to run (default both)")
    s.add_argument("--preemption-rule", choices=list(PREEMPTION_RULES), default=DEFAULT_PREEMPTION_RULE,
                   help="yt-thesis: the scenario's calibrated preemption, lost work as CPU used (default); "
                        "reconstruction: the earlier rule (tolerance 0.8, lost work as reserved)")
    s.add_argument("--merge", action="store_true",
                   help="add the runs to the --json file's (same policy, preemption and seed replaced)")
    s.add_argument("--table", metavar="JSON", help="only print the markdown table of an e1.json")
    s.add_argument("--study", metavar="FILE", help="the scenario, policies, seeds and preemption of "
                   "this study file (scenarios/studies/e1*.toml) instead of the options")
    s.set_defaults(func=cmd_e1)
