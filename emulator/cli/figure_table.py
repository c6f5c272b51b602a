"""Every figure table in the README and docs: its result file, the function that renders it and the
command that regenerates the file (``emulator figures``; the blocks themselves: results/figures.py).

Here, above the experiments, so that each renderer is a real import the layer contract sees: the
renderers of study output by name from the study layer's registry (emulator/study/renderers), the
non-grid experiments' own from their modules."""

from __future__ import annotations

from emulator.cli import fuzz
from emulator.experiments import abuse, e3tcp, recovery, reliability
from emulator.results import compare, registry
from emulator.results.figures import Figure
from emulator.study import tables as study_tables
from emulator.study.renderers import renderer
from emulator.study.tables import model_table

E1_COMMAND = "make e1 (emulator study scenarios/studies/e1.toml --out docs/e1.json)"
E1_SEEDS20 = "emulator study scenarios/studies/e1-seeds20.toml --out docs/e1-seeds20.json (~1 h on 2 cores)"
E1_EXPLORE = "emulator study scenarios/studies/e1-explore.toml --out docs/e1-explore.json (~1 h on 2 cores)"
# E2's sweeps are studies (scenarios/studies/e2*.toml); the real-time files below docs/ were
# written by the `emulator sweep` command they replaced, and the E2 tables read both.
E2_VIRTUAL = ("make e2-virtual (emulator study scenarios/studies/e2-virtual.toml "
              "--out docs/e2-sweep-virtual.json)")
E2_VIRTUAL_BIG = ("emulator study scenarios/studies/e2-virtual.toml --axis nodes=18000,24000 "
                  "--axis heartbeat.mode=delta --out docs/e2-sweep-virtual-big.json")
E2_REPEAT = ("emulator study scenarios/studies/e2.toml --out runs/e2-sweep-repeat.json && "
             "cp runs/e2-sweep-repeat.json docs/e2-sweep-repeat.json")
E2_MANY_CORE = ("make e2-many-core on a 16-core machine (scenarios/studies/e2.toml, one output per mode: "
                "runs/e2-many-core-{periodic,delta}.json, copied to "
                "docs/e2-many-core-b-{periodic,delta}.json; runs A and C: the same with other "
                "--axis nodes=..., docs/scalability.md)")
E2_YARN2020 = ("make e2-yarn2020 (emulator study scenarios/studies/e2-yarn2020.toml once per mode: "
               "--axis heartbeat.mode=periodic --axis nodes=3000,3500,4000,4250,4500,4750,5000,5500 "
               "--out docs/e2-sweep-yarn2020-periodic.json, and --axis heartbeat.mode=delta "
               "--axis nodes=6000,7000,7500,7750,8000,8250,8500,9000,10000 "
               "--out docs/e2-sweep-yarn2020-delta.json)")
# The bench is a study (scenarios/studies/bench.toml): docs/bench.json and docs/scale-*.json are its output.
BENCH = ("make bench-baseline (emulator study scenarios/studies/bench.toml --axis design=des,asyncio "
         "--force --out docs/bench.json)")
FIGURES: dict[str, Figure] = {
    "bench": Figure("docs/bench.json", renderer("bench"), BENCH),
    "scale-headline": Figure("docs/bench.json", renderer("scale-headline"),
                             BENCH + "; docs/scale.md for the others",
                             ("docs/scale-20k.json", "docs/scale-100k.json")),
    "scale": Figure("docs/bench.json", renderer("scale"),
                    "emulator study scenarios/studies/bench.toml --set nodes=N --set hours=0.1666667 "
                    "--out docs/scale-{20k,100k}.json (docs/scale.md); the coefficients: "
                    "docs/bench.json, docs/e2-sweep.json",
                    ("docs/e2-sweep.json", "docs/scale-20k.json", "docs/scale-100k.json")),
    "idle-host": Figure("docs/idle-host-50k.json", renderer("idle-host"),
                        "emulator run scenarios/idle-host-50k.toml --out runs/idle50k && "
                        "cp runs/idle50k/summary.json docs/idle-host-50k.json; the same with --set "
                        "cluster.join_over_s=0 --out runs/idle50k-storm, to docs/idle-host-50k-storm.json",
                        ("docs/idle-host-50k-storm.json",)),
    "e1": Figure("docs/e1.json", renderer("e1"), E1_COMMAND),
    "e1-headline": Figure("docs/e1.json", renderer("e1-headline"), E1_COMMAND),
    "e1-seeds20": Figure("docs/e1-seeds20.json", renderer("e1"), E1_SEEDS20),
    "e1-explore": Figure("docs/e1-explore.json", renderer("e1-variants"), E1_EXPLORE),
    "e1-explore-by-resource": Figure("docs/e1-explore.json", renderer("e1-by-resource"),
                                     E1_EXPLORE),
    "e1-explore-fair-share": Figure("docs/e1-explore.json", renderer("e1-fair-share"),
                                    E1_EXPLORE),
    "e1-seeds20-by-resource": Figure("docs/e1-seeds20.json", renderer("e1-by-resource"),
                                     E1_SEEDS20),
    "e1-seeds20-variants": Figure("docs/e1-seeds20.json", renderer("e1-variants"),
                                  E1_SEEDS20),
    "e1-seeds20-fairness": Figure("docs/e1-seeds20.json", renderer("e1-fairness"),
                                  E1_SEEDS20),
    "e1-seeds20-fair-share": Figure("docs/e1-seeds20.json", renderer("e1-fair-share"),
                                    E1_SEEDS20),
    "e2": Figure("docs/e2-sweep.json", renderer("e2"),
                 "make e2 && cp runs/e2-sweep.json docs/e2-sweep.json"),
    "e2-w2": Figure("docs/e2-sweep-w2.json", renderer("e2"),
                    "make e2-w2 && cp runs/e2-sweep-w2.json docs/e2-sweep-w2.json"),
    "e2-delta-12000": Figure("docs/e2-delta-12000-speed10.json", renderer("e2-costs"),
                             "emulator study scenarios/studies/e2.toml --set run.speed=10 --set "
                             "run.duration_s=690 --axis nodes=12000 --axis heartbeat.mode=delta --out "
                             "runs/e2-12k.json && cp runs/e2-12k.json docs/e2-delta-12000-speed10.json"),
    "e2-delta-50000": Figure("docs/e2-delta-50000-speed5.json", renderer("e2-costs"),
                             "emulator study scenarios/studies/e2.toml --set run.speed=5 --set "
                             "run.warmup_s=45 --set run.duration_s=200 --axis nodes=50000 --axis "
                             "heartbeat.mode=delta --out runs/e2-50k.json && cp runs/e2-50k.json "
                             "docs/e2-delta-50000-speed5.json"),
    "e2-costs": Figure("docs/e2-sweep.json", renderer("e2-costs"),
                       "make e2 && cp runs/e2-sweep.json docs/e2-sweep.json"),
    "e2-virtual": Figure("docs/e2-sweep-virtual.json", renderer("e2"),
                         E2_VIRTUAL),
    "e2-virtual-big": Figure("docs/e2-sweep-virtual-big.json", renderer("e2"),
                             E2_VIRTUAL_BIG),
    "e2-yarn2020": Figure("docs/e2-sweep-yarn2020-periodic.json", renderer("e2-yarn2020"), E2_YARN2020,
                          ("docs/e2-sweep-yarn2020-delta.json",)),
    "e2-headline": Figure("docs/e2-sweep.json", renderer("e2-headline"),
                          "make e2, then the two virtual sweeps (docs/scalability.md §5.2), and the "
                          "sweep run again (" + E2_REPEAT + ") and with two node hosts (make e2-w2)",
                          ("docs/e2-sweep-virtual.json", "docs/e2-sweep-virtual-big.json",
                           "docs/e2-sweep-repeat.json", "docs/e2-sweep-w2.json")),
    "e2-many-core": Figure("docs/e2-many-core-a-periodic.json", renderer("e2-many-core"), E2_MANY_CORE,
                           tuple(f"docs/e2-many-core-{run}-{mode}.json" for run in "abc"
                                 for mode in ("periodic", "delta"))[1:]),
    "e2-repeat": Figure("docs/e2-sweep-repeat.json", renderer("e2"), E2_REPEAT),
    "e2-dask": Figure("docs/e2-sweep-dask.json", renderer("e2"),
                      "make e2-dask && cp runs/e2-sweep-dask.json docs/e2-sweep-dask.json"),
    "e3": Figure("docs/ring-e3.json", renderer("e3"),
                 "make e3 (emulator study scenarios/studies/e3.toml --out docs/ring-e3.json --plots docs)"),
    "e3-tcp": Figure("docs/e3-tcp.json", e3tcp.markdown_table,
                     "make e3-tcp && cp runs/e3-tcp/e3-tcp.json docs/e3-tcp.json"),
    "e3-tcp-20000": Figure("docs/e3-tcp-20000.json", e3tcp.markdown_table,
                           "emulator e3-tcp --nodes 20000 --out runs/e3-tcp-20000 && "
                           "cp runs/e3-tcp-20000/e3-tcp.json docs/e3-tcp-20000.json"),
    "reliability": Figure("docs/reliability.json", reliability.markdown_table,
                          "emulator reliability --out runs/reliability && "
                          "cp runs/reliability/reliability.json docs/"),
    "recovery": Figure("docs/recovery.json", recovery.markdown_table,
                       "make recovery && cp runs/recovery/recovery.json docs/"),
    "compare-e3-300": Figure(
        "docs/compare-e3-300-periodic-vs-ring.json", compare.markdown_table,
        "emulator study scenarios/studies/e3-300.toml --runs runs/e3-300 && emulator compare "
        "runs/e3-300/periodic-nodes=300-seed=1 runs/e3-300/ring-nodes=300-seed=1 --metrics "
        "detection,heartbeats --out runs/cmp-e3 && "
        "cp runs/cmp-e3/compare.json docs/compare-e3-300-periodic-vs-ring.json"),
    "compare-quickstart": Figure(
        "docs/compare-quickstart-periodic-vs-delta.json", compare.markdown_table,
        "emulator run scenarios/quickstart.toml --out runs/qs-periodic && emulator run "
        "scenarios/quickstart.toml --set heartbeat.mode=delta --out runs/qs-delta && emulator compare "
        "runs/qs-periodic runs/qs-delta --metrics heartbeats --out runs/cmp-qs && "
        "cp runs/cmp-qs/compare.json docs/compare-quickstart-periodic-vs-delta.json"),
    "traces": Figure("docs/traces.json", renderer("traces"),
                     "make traces (emulator study scenarios/studies/traces.toml --out docs/traces.json)"),
    "usage-messages": Figure("docs/usage-messages.json", renderer("usage-messages"),
                             "emulator study scenarios/studies/usage-messages.toml --out "
                             "docs/usage-messages.json"),
    # Model studies (emulator/study/models.py): E4's Borg cell, E5's stochastic bin packing.
    "e4": Figure("docs/e4.json", model_table("borg-cell", "modes"), "make e4"),
    "e4-why": Figure("docs/e4.json", model_table("borg-cell", "why"), "make e4"),
    "e5": Figure("docs/e5.json", model_table("sbp-offline", "methods"), "make e5"),
    "e5-bin-sizes": Figure("docs/e5.json", model_table("sbp-offline", "bin-sizes"), "make e5"),
    "baselines": Figure("docs/e5.json", model_table("sbp-offline", "baselines"), "make e5"),
    "e5-cluster": Figure("docs/e5-cluster.json", model_table("sbp-cluster", "methods"), "make e5-cluster"),
    "e5-demand": Figure("docs/e5-cluster.json", model_table("sbp-cluster", "demand"), "make e5-cluster"),
    "e5-cluster-compact": Figure("docs/e5-cluster.json", model_table("sbp-cluster", "compact"),
                                 "make e5-cluster"),
    "abuse": Figure("docs/abuse-results.json", abuse.markdown_table,
                    "emulator abuse scenarios/abuse.toml --out docs/abuse-results.json"),
    "study-quickstart-heartbeats": Figure(
        "docs/study-quickstart-heartbeats.json", study_tables.markdown,
        "emulator study scenarios/studies/quickstart-heartbeats.toml --force "
        "--out docs/study-quickstart-heartbeats.json"),
    # Not from a result file: generated from the metrics registry itself.
    "metrics-glossary": Figure("", registry.glossary_markdown,
                               "emulator figures --write docs/metrics.md"),
    "fuzz": Figure("docs/fuzz.json", fuzz.markdown_table,
                   "emulator fuzz --examples 20000 --seed 0 --json > docs/fuzz.json"),
}
