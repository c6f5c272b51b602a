"""``emulator reliability``: the faults and fault combinations the emulator must survive, each run
with the invariant checker on, one table of what was lost.

Every case is a shipped scenario with a few changes (written out in ``CASES``), run in virtual
time with ``--check-invariants``: a task lost or run twice, a node over capacity or an RM view
that disagrees with a node's stops the case with the checker's report. Then a scenario-file fuzz
round. The combinations are the ones adversarial testing found holes in (issue 13): restarts
under network latency, a restart inside a message-delay window, stalls and pauses overlapping a
restart, a slow or lossy network under the ring, crashes with no surviving watcher.
"""

from __future__ import annotations

import argparse
import sys
import tomllib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgspec
from rich.console import Console

from emulator.harness.invariants import InvariantViolation
from emulator.results.console import run_with_progress
from emulator.results.recording import recorded
from emulator.results.summary import write_results
from emulator.scenario.loader import ScenarioError, scenario_from_dict

Doc = dict[str, Any]


class Stopped(Exception):
    """A signal stopped a case: the whole command stops (a partial case is no result)."""


class Case(msgspec.Struct, frozen=True):
    name: str
    scenario: str  # a file in scenarios/
    what: str  # one line for the table
    edit: str  # the changes, in words (the code is ``EDITS[name]``)


def _set(doc: Doc, **values: Any) -> Doc:
    for dotted, value in values.items():
        target = doc
        *parents, leaf = dotted.split("__")
        for key in parents:
            target = target.setdefault(key, {})
        target[leaf] = value
    return doc


def _faults(doc: Doc, *faults: Doc) -> Doc:
    doc["faults"] = list(faults)
    return doc


def _small_ring(doc: Doc, nodes: int) -> Doc:
    doc["cluster"]["nodes"][0]["count"] = nodes
    return doc


CASES: tuple[tuple[Case, Callable[[Doc], Doc]], ...] = (
    (Case("soak", "soak.toml", "2 emulated hours, 1,000 nodes, every fault kind and an RM restart",
          "as shipped"), lambda d: d),
    (Case("soak-restart-in-delay", "soak.toml",
          "the soak's RM restart inside its message-delay window",
          "faults[4].at_s = 3500, faults[5].at_s = 3520, run.duration_s = 3800 (later faults dropped)"),
     lambda d: _set(d, run__duration_s=3800)
     | {"faults": [f | ({"at_s": 3500} if i == 4 else {"at_s": 3520} if i == 5 else {})
                   for i, f in enumerate(d["faults"]) if i in (4, 5) or f["at_s"] < 3800]}),
    (Case("restart-latency-periodic", "rm-restart.toml", "RM restart under 1 s network latency, periodic",
          "transport.latency_s = 1, heartbeat.mode = periodic, 300 nodes"),
     lambda d: _small_ring(_set(d, transport__latency_s=1.0, heartbeat__mode="periodic"), 300)),
    (Case("restart-latency-delta", "rm-restart.toml", "RM restart under 1 s network latency, delta + ring",
          "transport.latency_s = 1, heartbeat.mode = delta, 300 nodes"),
     lambda d: _small_ring(_set(d, transport__latency_s=1.0, heartbeat__mode="delta"), 300)),
    (Case("restart-stall-pause", "rm-restart.toml", "RM stall and node pauses overlapping an RM restart",
          "300 nodes, delta; rm_stall 10 s at 590 s, 5% of nodes paused 20 s at 595 s"),
     lambda d: _faults(_small_ring(_set(d, heartbeat__mode="delta"), 300),
                       {"kind": "rm_stall", "at_s": 590, "duration_s": 10},
                       {"kind": "pause", "at_s": 595, "fraction": 0.05, "duration_s": 20},
                       *[f for f in d["faults"] if f["kind"] == "rm_restart"])),
    (Case("stalls-latency", "e3-stalls.toml", "stalls, liveness loss, RM stall under 0.35 s latency",
          "transport.latency_s = 0.35 (probe round trip longer than the probe timeout)"),
     lambda d: _set(d, transport__latency_s=0.35)),
    (Case("stalls-slow-rm-link", "e3-stalls.toml", "stalls with the RM's messages delayed up to 2 s",
          "a messages fault: delay_s = 2 on every message to and from the RM, 100-400 s"),
     lambda d: _faults(d, *d["faults"],
                       {"kind": "messages", "at_s": 100, "duration_s": 300, "delay_s": 2.0})),
    (Case("stalls-probe-loss", "e3-stalls.toml", "stalls with half of the RM's probes lost",
          "a messages fault: loss = 0.5 of Probe, 100-400 s"),
     lambda d: _faults(d, *d["faults"], {"kind": "messages", "at_s": 100, "duration_s": 300, "loss": 0.5,
                                        "types": ["Probe"]})),
    (Case("all-crash", "e3-rack.toml", "every node crashes: no watcher survives",
          "20 nodes, all crash at 200 s, run to 900 s"),
     lambda d: _faults(_small_ring(_set(d, run__duration_s=900), 20),
                       {"kind": "crash", "at_s": 200, "fraction": 1.0})),
)


def case_scenario(root: Path, case: Case, edit: Callable[[Doc], Doc]) -> Any:
    path = root / case.scenario
    try:
        doc = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError) as err:
        raise ScenarioError(f"{path}: {err}") from None
    doc.pop("sweep", None)
    doc = edit(doc)
    doc["name"] = f"reliability-{case.name}"
    return scenario_from_dict(doc, f"{path} ({case.name}: {case.edit})", path.parent)


def run_case(root: Path, case: Case, edit: Callable[[Doc], Doc], out: Path,
             console: Console | None = None) -> dict[str, Any]:
    sc = case_scenario(root, case, edit)
    run_dir = out / case.name
    run_dir.mkdir(parents=True, exist_ok=True)
    kinds = [str(f.__struct_config__.tag) for f in sc.faults]
    row: dict[str, Any] = {"case": case.name, "what": case.what, "edit": case.edit,
                           "nodes": sc.node_count, "faults": kinds}
    try:
        with recorded(run_dir, "experiment", str(root / case.scenario), sc, {}, [],
                      check_invariants=True) as rec:
            outcome = run_with_progress(sc, console or Console(quiet=True), run_dir / "events.jsonl", True)
            s = write_results(outcome, run_dir)
            rec.finish(0)
    except InvariantViolation as err:
        return row | {"violation": str(err).splitlines()[0]}
    if outcome.partial:
        raise Stopped(case.name)
    return row | {
        "violation": None,
        "tasks_submitted": s["tasks_submitted"], "tasks_completed_once": s["tasks_completed_once"],
        "tasks_lost": s["tasks_lost"], "tasks_duplicated": s["tasks_duplicated"],
        "invariant_checks": s["invariant_checks"], "end_check": s["end_check"],
        "crashed": s["crashed_nodes"], "crashed_removed": s["crashed_removed"],
        "false_removals": s["false_removals"], "wall_s": round(outcome.wall_s, 1),
    }


def run_fuzz_round(examples: int, seed: int) -> dict[str, Any]:
    from emulator.experiments.fuzz import fuzz

    return {"case": "fuzz", "seed": seed, **fuzz(examples, seed).summary()}


def markdown_table(rows: list[dict[str, Any]]) -> str:
    lines = [
        "| case | faults | nodes | tasks submitted | lost / run twice | crashed removed | false removals "
        "| invariant checks |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        if r["case"] == "fuzz":
            continue
        if r["violation"]:
            lines.append(
                f"| {r['what']} | {', '.join(r['faults'])} | {r['nodes']:,} | | **{r['violation']}** | | | |"
            )
            continue
        lines.append(
            f"| {r['what']} | {', '.join(sorted(set(r['faults'])))} | {r['nodes']:,} | "
            f"{r['tasks_submitted']:,} | "
            f"{r['tasks_lost']} / {r['tasks_duplicated']} | {r['crashed_removed']} / {r['crashed']} | "
            f"{r['false_removals']} | {r['invariant_checks']:,} |"
        )
    for r in rows:
        if r["case"] == "fuzz":
            lines.append(
                f"\nScenario-file fuzzing ({r['inputs_tried']:,} inputs, seed {r['seed']}): "
                f"{r['valid_runs']:,} valid runs, {r['clear_errors']:,} clear errors, "
                f"**{r['crashes']} crashes**."
            )
    return "\n".join(lines)


def cmd_reliability(args: argparse.Namespace) -> int:
    if args.table:
        print(markdown_table(msgspec.json.decode(Path(args.table).read_bytes())))
        return 0
    console = Console(stderr=True, quiet=args.quiet)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    wanted = set(args.cases.split(",")) if args.cases else None
    unknown = sorted((wanted or set()) - {c.name for c, _ in CASES})
    if unknown:
        print(f"error: --cases: unknown case `{unknown[0]}`; expected one of "
              + ", ".join(c.name for c, _ in CASES), file=sys.stderr)
        return 2
    rows: list[dict[str, Any]] = []
    for case, edit in CASES:
        if wanted is not None and case.name not in wanted:
            continue
        console.print(f"[bold]{case.name}[/]: {case.what} ...")
        try:
            row = run_case(Path(args.scenarios), case, edit, out, console)
        except Stopped:
            console.print(f"stopped during {case.name}: no reliability.json written")
            return 130
        rows.append(row)
        bad = row["violation"] or row["tasks_lost"] or row["tasks_duplicated"] or row["false_removals"]
        console.print(f"  {'[red]FAILED[/]' if bad else 'ok'}: {row.get('violation') or ''}"
                      f"lost {row.get('tasks_lost')}, twice {row.get('tasks_duplicated')}, "
                      f"false removals {row.get('false_removals')}")
    if args.fuzz > 0:
        console.print(f"[bold]fuzz[/]: {args.fuzz} scenario files ...")
        rows.append(run_fuzz_round(args.fuzz, 0))
    (out / "reliability.json").write_bytes(msgspec.json.format(msgspec.json.encode(rows)) + b"\n")
    print(markdown_table(rows))
    console.print(f"results in {out}/ (reliability.json, one run directory per case)")
    failed = [r for r in rows if r["case"] != "fuzz" and (r["violation"] or r["tasks_lost"]
                                                          or r["tasks_duplicated"] or r["false_removals"])]
    failed += [r for r in rows if r["case"] == "fuzz" and r["crashes"]]
    return 3 if failed else 0


def add_command(sub: Any) -> None:
    s = sub.add_parser("reliability", help="fault combinations with invariants on: what was lost (~10 min)")
    s.add_argument("--out", default="runs/reliability", help="results directory (default runs/reliability)")
    s.add_argument("--scenarios", default="scenarios", help="directory of the shipped scenarios")
    s.add_argument("--cases", help="comma-separated case names (default all: " +
                   ", ".join(c.name for c, _ in CASES) + ")")
    s.add_argument("--fuzz", type=int, default=5000, help="scenario files to fuzz at the end (0: none)")
    s.add_argument("--table", metavar="JSON", help="only print the results.md table of a reliability.json")
    s.add_argument("--quiet", action="store_true")
    s.set_defaults(func=cmd_reliability)
