"""Figure tables in the README and docs, regenerated from the committed result files.

A table in a markdown file sits between ``<!-- figure: NAME -->`` and ``<!-- /figure -->``;
``emulator figures --write FILE`` replaces each such block with the table rendered from NAME's
result file, and ``--check`` fails when a block differs from its file (hand-edited or stale).
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

import msgspec


class Figure(NamedTuple):
    source: str  # result file, relative to the repository root
    renderer: str  # "module:function" taking the decoded file(s), returning markdown
    command: str  # what regenerates the source
    extra: tuple[str, ...] = ()  # more result files, passed to the renderer after the first


E1_COMMAND = "make e1 (emulator e1 scenarios/e1-faithful.toml --out runs/e1 --json docs/e1.json)"
# The two files below were run before issue 33: preemption by the earlier rule, and `fit` with the
# window of 30 it had then (`fit-w60` there is today's `fit`).
E1_SEEDS20 = ("emulator e1 scenarios/e1-faithful.toml --out runs/e1-20 --json docs/e1-seeds20.json "
              "--preemption-rule reconstruction "
              "--seeds 1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20 "
              "--policies none,thesis,fit,fit-fair --variant fit-b0.4-w60=fit,share_band=0.4,window=60 "
              "--variant fit-w60=fit,window=60 "
              "(~1 h on 2 cores; run before issue 33, when `fit` had window 30)")
E1_EXPLORE = ("emulator e1 scenarios/e1-faithful.toml --out runs/e1-explore --json docs/e1-explore.json "
              "--preemption-rule reconstruction (run before issue 33, when `fit` had window 30) "
              "--seeds 1,2,3,4,5 --preemption on --policies none,thesis,fit,fit-fair --variant "
              "fit-b0.2=fit,share_band=0.2 --variant fit-b0.3=fit,share_band=0.3 --variant "
              "fit-b0.5=fit,share_band=0.5 --variant fit-bl5=fit,below_level_refusals=5 --variant "
              "fit-w60=fit,window=60 --variant fit-w120=fit,window=120 --variant "
              "fit-b0.3-w60=fit,share_band=0.3,window=60 --variant fit-b0.4-w60=fit,share_band=0.4,window=60 "
              "--variant fit-ff0.5=fit,fallback_fraction=0.5; the ledger rows then with --merge --policies= "
              "--variant fit-l0.05=fit,ledger_cap=0.05 --variant fit-l0.1=fit,ledger_cap=0.1 "
              "--variant fit-l0.2=fit,ledger_cap=0.2; the fair-share rows then with --merge --policies=none,"
              "thesis,fit,fit-fair --variant fit-b0.3=fit,share_band=0.3 --variant fit-w60=fit,window=60 "
              "--variant fit-b0.4-w60=fit,share_band=0.4,window=60 (the same runs again, now with fair "
              "shares) --variant ffs0.1=fit,share_band=0.1,band_reference=fair_share --variant "
              "ffs0.2=fit,share_band=0.2,band_reference=fair_share --variant ffs0.1-bl5=fit,share_band=0.1,"
              "below_level_refusals=5,band_reference=fair_share --variant ffs0.2-w60=fit,share_band=0.2,"
              "window=60,band_reference=fair_share --variant ffs0.3-w60=fit,share_band=0.3,window=60,"
              "band_reference=fair_share; the rest then with --merge --policies= --variant "
              "fit-w60-r100=fit,window=60,max_consecutive_refusals=100 --variant "
              "fit-w60-tetris=fit,window=60,heuristic=tetris --variant "
              "fit-w60-ct=fit,window=60,normalisation=cluster_total")
E2_VIRTUAL = ("emulator sweep scenarios/e2-scale-sweep-virtual.toml --out runs/e2v && "
              "cp runs/e2v/sweep.json docs/e2-sweep-virtual.json")
E2_VIRTUAL_BIG = ("emulator sweep scenarios/e2-scale-sweep-virtual.toml --nodes 18000,24000 --modes delta "
                  "--out runs/e2v-big && cp runs/e2v-big/sweep.json docs/e2-sweep-virtual-big.json")
E2_YARN2020 = ("make e2-yarn2020 (emulator sweep scenarios/e2-scale-sweep-yarn2020.toml --modes periodic "
               "--nodes 3000,3500,4000,4250,4500,5000 --duration 400 --out runs/e2-yarn2020-periodic, and "
               "--modes delta --nodes 6000,7000,7500,7750,8000,8500,9000 --out runs/e2-yarn2020-delta; each "
               "sweep.json copied to docs/e2-sweep-yarn2020-{periodic,delta}.json)")
FIGURES: dict[str, Figure] = {
    "bench": Figure("docs/bench.json", "emulator.experiments.bench:markdown_table",
                    "emulator bench --baseline --out docs/bench.json"),
    "scale-headline": Figure("docs/bench.json", "emulator.experiments.scalemodel:headline_table",
                             "emulator bench --baseline --out docs/bench.json; docs/scale.md for the others",
                             ("docs/scale-20k.json", "docs/scale-100k.json")),
    "scale": Figure("docs/bench.json", "emulator.experiments.scalemodel:markdown_table",
                    "emulator bench --nodes N --hours 0.1666667 --out docs/scale-{20k,100k}.json "
                    "(docs/scale.md); the coefficients: docs/bench.json, docs/e2-sweep.json",
                    ("docs/e2-sweep.json", "docs/scale-20k.json", "docs/scale-100k.json")),
    "idle-host": Figure("docs/idle-host-50k.json", "emulator.experiments.scalemodel:idle_host_table",
                        "emulator run scenarios/idle-host-50k.toml --out runs/idle50k && "
                        "cp runs/idle50k/summary.json docs/idle-host-50k.json; the same with --set "
                        "cluster.join_over_s=0 --out runs/idle50k-storm, to docs/idle-host-50k-storm.json",
                        ("docs/idle-host-50k-storm.json",)),
    "e1": Figure("docs/e1.json", "emulator.experiments.e1tables:markdown_table", E1_COMMAND),
    "e1-headline": Figure("docs/e1.json", "emulator.experiments.e1tables:headline_table", E1_COMMAND),
    "e1-seeds20": Figure("docs/e1-seeds20.json", "emulator.experiments.e1tables:markdown_table", E1_SEEDS20),
    "e1-explore": Figure("docs/e1-explore.json", "emulator.experiments.e1tables:variants_table", E1_EXPLORE),
    "e1-explore-by-resource": Figure("docs/e1-explore.json",
                                     "emulator.experiments.e1tables:by_resource_table", E1_EXPLORE),
    "e1-explore-fair-share": Figure("docs/e1-explore.json", "emulator.experiments.e1tables:fair_share_table",
                                    E1_EXPLORE),
    "e1-seeds20-by-resource": Figure("docs/e1-seeds20.json",
                                     "emulator.experiments.e1tables:by_resource_table", E1_SEEDS20),
    "e1-seeds20-variants": Figure("docs/e1-seeds20.json", "emulator.experiments.e1tables:variants_table",
                                  E1_SEEDS20),
    "e1-seeds20-fairness": Figure("docs/e1-seeds20.json", "emulator.experiments.e1tables:fairness_table",
                                  E1_SEEDS20),
    "e1-seeds20-fair-share": Figure("docs/e1-seeds20.json", "emulator.experiments.e1tables:fair_share_table",
                                    E1_SEEDS20),
    "e2": Figure("docs/e2-sweep.json", "emulator.experiments.sweep:markdown_table",
                 "make e2 && cp runs/e2-sweep/sweep.json docs/e2-sweep.json"),
    "e2-w2": Figure("docs/e2-sweep-w2.json", "emulator.experiments.sweep:markdown_table",
                    "make e2-w2 && cp runs/e2-sweep-w2/sweep.json docs/e2-sweep-w2.json"),
    "e2-delta-12000": Figure("docs/e2-delta-12000-speed10.json", "emulator.experiments.sweep:costs_table",
                             "emulator sweep scenarios/e2-scale-sweep.toml --speed 10 --nodes 12000 "
                             "--modes delta --out runs/e2-12k && cp runs/e2-12k/sweep.json "
                             "docs/e2-delta-12000-speed10.json"),
    "e2-costs": Figure("docs/e2-sweep.json", "emulator.experiments.sweep:costs_table",
                       "make e2 && cp runs/e2-sweep/sweep.json docs/e2-sweep.json"),
    "e2-virtual": Figure("docs/e2-sweep-virtual.json", "emulator.experiments.sweep:markdown_table",
                         E2_VIRTUAL),
    "e2-virtual-big": Figure("docs/e2-sweep-virtual-big.json", "emulator.experiments.sweep:markdown_table",
                             E2_VIRTUAL_BIG),
    "e2-headline": Figure("docs/e2-sweep.json", "emulator.experiments.sweep:headline_table",
                          "make e2, then the two virtual sweeps (docs/scalability.md §5.2)",
                          ("docs/e2-sweep-virtual.json", "docs/e2-sweep-virtual-big.json")),
    "e2-yarn2020": Figure("docs/e2-sweep-yarn2020-periodic.json",
                          "emulator.experiments.yarn2020:markdown_table", E2_YARN2020,
                          ("docs/e2-sweep-yarn2020-delta.json",)),
    "e3": Figure("docs/ring-e3.json", "emulator.experiments.e3:markdown_table",
                 "make e3 && cp runs/e3/e3.json docs/ring-e3.json"),
    "e3-tcp": Figure("docs/e3-tcp.json", "emulator.experiments.e3tcp:markdown_table",
                     "make e3-tcp && cp runs/e3-tcp/e3-tcp.json docs/e3-tcp.json"),
    "e3-tcp-20000": Figure("docs/e3-tcp-20000.json", "emulator.experiments.e3tcp:markdown_table",
                           "emulator e3-tcp --nodes 20000 --out runs/e3-tcp-20000 && "
                           "cp runs/e3-tcp-20000/e3-tcp.json docs/e3-tcp-20000.json"),
    "reliability": Figure("docs/reliability.json", "emulator.experiments.reliability:markdown_table",
                          "emulator reliability --out runs/reliability && "
                          "cp runs/reliability/reliability.json docs/"),
    "recovery": Figure("docs/recovery.json", "emulator.experiments.recovery:markdown_table",
                       "make recovery && cp runs/recovery/recovery.json docs/"),
    "compare-e3-300": Figure(
        "docs/compare-e3-300-periodic-vs-ring.json", "emulator.results.compare:markdown_table",
        "emulator e3 --nodes 300 --modes periodic ring --out runs/e3-300 && emulator compare "
        "runs/e3-300/periodic runs/e3-300/ring --metrics detection,heartbeats --out runs/cmp-e3 && "
        "cp runs/cmp-e3/compare.json docs/compare-e3-300-periodic-vs-ring.json"),
    "compare-quickstart": Figure(
        "docs/compare-quickstart-periodic-vs-delta.json", "emulator.results.compare:markdown_table",
        "emulator run scenarios/quickstart.toml --out runs/qs-periodic && emulator run "
        "scenarios/quickstart.toml --set heartbeat.mode=delta --out runs/qs-delta && emulator compare "
        "runs/qs-periodic runs/qs-delta --metrics heartbeats --out runs/cmp-qs && "
        "cp runs/cmp-qs/compare.json docs/compare-quickstart-periodic-vs-delta.json"),
    "traces": Figure("docs/traces.json", "emulator.experiments.traces:table",
                     "make traces (emulator traces --out runs/traces --json docs/traces.json)"),
    "usage-messages": Figure("docs/usage-messages.json", "emulator.experiments.usagemsgs:markdown_table",
                             "emulator usage-messages --out docs/usage-messages.json"),
    "e4": Figure("docs/e4.json", "emulator.experiments.e4:markdown_table", "make e4"),
    "e5": Figure("docs/e5.json", "emulator.experiments.e5:markdown_table", "make e5"),
    "e5-cluster": Figure("docs/e5-cluster.json", "emulator.experiments.e5cluster:markdown_table",
                         "make e5-cluster"),
    "e5-cluster-compact": Figure("docs/e5-cluster.json", "emulator.experiments.e5cluster:compact_table",
                                 "make e5-cluster"),
    "e5-bin-sizes": Figure("docs/e5.json", "emulator.experiments.e5:bin_sizes_table", "make e5"),
    "baselines": Figure("docs/baselines.json", "emulator.experiments.e5:baselines_table", "make baselines"),
    "abuse": Figure("docs/abuse-results.json", "emulator.experiments.abuse:markdown_table",
                    "emulator abuse scenarios/abuse.toml --out docs/abuse-results.json"),
    # Not from a result file: generated from the metrics registry itself.
    "metrics-glossary": Figure("", "emulator.results.registry:glossary_markdown",
                               "emulator figures --write docs/metrics.md"),
    "fuzz": Figure("docs/fuzz.json", "emulator.cli.fuzz:markdown_table",
                   "emulator fuzz --examples 20000 --seed 0 --json > docs/fuzz.json"),
}

_BLOCK = re.compile(r"(<!-- figure: (?P<name>[\w.-]+) -->\n)(?P<body>.*?)(<!-- /figure -->)", re.S)


class FigureError(Exception):
    """A block names an unknown figure, or its result file is missing or unreadable."""


def render(name: str, root: Path = Path(".")) -> str:
    fig = FIGURES.get(name)
    if fig is None:
        raise FigureError(f"unknown figure {name!r} (known: {', '.join(sorted(FIGURES))})")
    module, func = fig.renderer.split(":")
    if not fig.source:  # rendered from code (the metrics registry), not from a result file
        make: Callable[[], str] = getattr(importlib.import_module(module), func)
        note = f"<sub>Generated from `{module}`; regenerate with `{fig.command}`.</sub>"
        return make().rstrip("\n") + f"\n\n{note}\n"
    docs = []
    for source in (fig.source, *fig.extra):
        path = root / source
        try:
            docs.append(msgspec.json.decode(path.read_bytes()))
        except (OSError, msgspec.DecodeError) as e:
            raise FigureError(f"figure {name}: cannot read {path}: {e} (regenerate: {fig.command})") from e
    table: Callable[..., str] = getattr(importlib.import_module(module), func)
    sources = ", ".join(f"`{s}`" for s in (fig.source, *fig.extra))
    note = f"<sub>From {sources}; regenerate with `{fig.command}`.</sub>"
    return table(*docs).rstrip("\n") + f"\n\n{note}\n"


def refresh(text: str, root: Path = Path(".")) -> str:
    """``text`` with every figure block re-rendered."""
    return _BLOCK.sub(lambda m: m.group(1) + render(m.group("name"), root) + m.group(4), text)


def blocks(text: str) -> list[str]:
    return [m.group("name") for m in _BLOCK.finditer(text)]


def stale(path: Path, root: Path = Path(".")) -> list[str]:
    """Names of the figure blocks in ``path`` that differ from their result files."""
    text = path.read_text(encoding="utf-8")
    out = []
    for m in _BLOCK.finditer(text):
        if m.group("body") != render(m.group("name"), root):
            out.append(m.group("name"))
    return out
