"""How usage reporting changes NM -> RM messages (design.md §3b): the table of
scenarios/studies/usage-messages.toml's output, usage-quickstart.toml with and without its usage
models (the same workload otherwise), periodic and delta heartbeats. Periodic heartbeats carry every
usage-modelled container's usage at every beat (no extra messages, bigger ones); delta heartbeats
carry a container's usage only when it moved by more than the threshold, and such a change makes an
otherwise idle delta node send a heartbeat (more messages than without usage)."""

from __future__ import annotations

from typing import Any

import msgspec

from emulator.study.output import StudyOutput
from emulator.study.spec import StudyError, study_from_data

MODE = "heartbeat.mode"
NEEDS = ("statuses_sent", "usage", "traffic.to_rm_bytes")


def rows(doc: dict[str, Any]) -> list[dict[str, Any]]:
    """One row per point (variant, then heartbeat mode, as the study orders them)."""
    output = msgspec.convert(doc, StudyOutput)
    study = study_from_data(output.study, f"{output.file} (as stored in the output)")
    if MODE not in study.axes or not set(NEEDS) <= set(study.collect):
        raise StudyError(f"{output.file}: the usage-messages table needs a `{MODE}` axis and `collect` "
                         f"of {', '.join(NEEDS)}")
    labels = {v.name: v.description or v.name for v in study.variants}
    return [{
        "scenario": labels.get(p.variant, p.variant), "mode": p.coords[MODE],
        "heartbeats_sent": p.metrics["heartbeats_sent"], "statuses_sent": p.collected["statuses_sent"],
        "to_rm_bytes": p.collected["traffic.to_rm_bytes"],
        "usage_reports_sent": (p.collected["usage"] or {}).get("usage_reports_sent", 0),
        "containers_completed": p.metrics["containers_completed"],
    } for p in output.points]


def markdown_table(doc: dict[str, Any]) -> str:
    lines = ["| scenario | heartbeats | heartbeats sent | bytes to the RM | container statuses | "
             "usage entries | tasks completed |", "|---|---|---|---|---|---|---|"]
    for r in rows(doc):
        lines.append(f"| {r['scenario']} | {r['mode']} | {r['heartbeats_sent']:,} | "
                     f"{r['to_rm_bytes']:,} | {r['statuses_sent']:,} | {r['usage_reports_sent']:,} | "
                     f"{r['containers_completed']:,} |")
    return "\n".join(lines)
