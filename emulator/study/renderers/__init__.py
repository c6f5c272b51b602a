"""The docs' tables of study output, by name: one registry, owned by the study layer and imported,
so the layer check sees every renderer. A renderer takes the decoded JSON of its file (and of the
extra files a figure names, for those that read several) and returns markdown. The figures registry
(emulator/cli/figure_table.py) names them, and a scenario study's ``[[tables]] render = NAME``
prints one from the study's own output (those marked ``own``: they read one study's output alone).

A module per family: E1 (``e1``, reading ``e1results``), E2 (``e2``, ``yarn2020``), E3, the
replayed traces, the usage messages, the bench and the scale model on paper (``bench``, ``scale``).
"""

from __future__ import annotations

import difflib
from collections.abc import Callable
from typing import Any, NamedTuple

from emulator.study.renderers import bench, e1, e2, e3, scale, traces, usage_messages, yarn2020


class Renderer(NamedTuple):
    render: Callable[..., str]  # the decoded JSON of a file (and of more files) -> markdown
    about: str
    own: bool = True  # reads one study's output alone: a scenario study may name it in [[tables]]


RENDERERS: dict[str, Renderer] = {
    "e1": Renderer(e1.markdown_table, "E1 per policy beside the thesis, mean ± sd over the seeds"),
    "e1-headline": Renderer(e1.headline_table, "E1's headline: gains, gap closed, user moves, lost work"),
    "e1-variants": Renderer(e1.variants_table, "E1's variants beside the policies they vary"),
    "e1-by-resource": Renderer(e1.by_resource_table, "E1's users grouped by their dominant resource"),
    "e1-fair-share": Renderer(e1.fair_share_table, "E1's dominant and fair shares per policy"),
    "e1-fairness": Renderer(e1.fairness_table, "E1's fairness bound per policy"),
    "e2": Renderer(e2.markdown_table, "E2's sweep: a row per point, each mode's limit and the ratio"),
    "e2-costs": Renderer(e2.costs_table, "E2's costs per point: the RM's and the node host's"),
    "e2-headline": Renderer(e2.headline_table, "E2's headline: the paper, real time, virtual time",
                            own=False),
    "e2-many-core": Renderer(e2.many_core_table, "E2 on a many-core machine, sweeps in mode pairs",
                             own=False),
    "e2-yarn2020": Renderer(yarn2020.markdown_table, "E2 with a YARN-like RM beside Mao et al. (2020)",
                            own=False),
    "e3": Renderer(e3.markdown_table, "E3's crash experiment per failure-detection mode"),
    "traces": Renderer(traces.table, "replayed traces: job completion times per scheduler"),
    "usage-messages": Renderer(usage_messages.markdown_table, "NM -> RM messages with and without usage"),
    "bench": Renderer(bench.table, "the bench: speed per mode against the floor, memory per NodeManager",
                      own=False),  # a model study's: its study names the model's own table
    "scale-headline": Renderer(scale.headline_table, "CPU time per size in both modes, virtual time",
                               own=False),
    "scale": Renderer(scale.markdown_table, "the scale model on paper and its checks", own=False),
    "idle-host": Renderer(scale.idle_host_table, "one worker hosting idle delta nodes (run summaries)",
                          own=False),
}


def renderer(name: str) -> Callable[..., str]:
    """The registered renderer ``name``; a KeyError that names the known ones otherwise."""
    if name not in RENDERERS:
        close = difflib.get_close_matches(name, list(RENDERERS), n=1, cutoff=0.6)
        hint = f"did you mean {close[0]!r}? " if close else ""
        raise KeyError(f"no renderer {name!r}; {hint}(expected one of {', '.join(RENDERERS)})")
    return RENDERERS[name].render


def own_renderers() -> list[str]:
    """The names a scenario study's ``[[tables]] render`` may give besides its sweep tables."""
    return [name for name, r in RENDERERS.items() if r.own]


def render_own(name: str, output: dict[str, Any]) -> str:
    return RENDERERS[name].render(output)
