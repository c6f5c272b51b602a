"""The YARN Fair Scheduler allocation file (``fair-scheduler.xml``) an SLS user passes beside the
trace, read into pools: the queue tree (a queue ``a`` under ``root`` is pool ``a``, its child
``b`` pool ``a.b``), ``weight``, ``minResources`` (``min_cpu``/``min_ram_gib``), ``maxResources``
(``max_cpu``/``max_ram_gib``) and the scheduling policy of ``root`` (``schedulingPolicy``, else
``defaultQueueSchedulingPolicy``) as the scheduler's policy. A queue's own ``schedulingPolicy`` gets
a warning (one policy schedules every pool); what else its pools do not model (``maxRunningApps``,
ACLs, placement rules, ...) is named in one more.

The file is read safely: at most 4 MiB, a document type declaration (the way to entity
expansion and external entities) refused, queues nested at most 32 deep.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from emulator.scenario.traces.model import TraceError, read_text

MAX_BYTES = 4 << 20
MAX_DEPTH = 32
MAX_QUEUES = 10_000
# YARN's policy names (short or class) -> the emulator's scheduler policy.
POLICIES = {"drf": "drf", "fifo": "fifo", "fair": "drf", "dominantresourcefairnesspolicy": "drf",
            "fifopolicy": "fifo", "fairsharepolicy": "drf"}
QUEUE_TAGS = ("queue", "pool")
# Read into pools; everything else inside a queue is reported.
_READ = {"weight", "minResources", "maxResources", "schedulingPolicy"}
_TOP_IGNORED = {
    "queueMaxResourcesDefault", "queueMaxAppsDefault", "queueMaxAMShareDefault", "userMaxAppsDefault",
    "defaultFairSharePreemptionTimeout", "defaultMinSharePreemptionTimeout",
    "defaultFairSharePreemptionThreshold", "queuePlacementPolicy", "placementPolicy", "user",
    "reservation-agent", "reservation-policy", "reservation-planner",
}
_DECLARATION = re.compile(r"<!\s*(DOCTYPE|ENTITY)", re.IGNORECASE)
_AMOUNT = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(mb|gb|vcores?)\s*$", re.IGNORECASE)
_KEYED = re.compile(r"^\s*(memory-mb|memory|vcores)\s*=\s*(\d+(?:\.\d+)?)\s*$", re.IGNORECASE)
_PERCENT = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*%\s*(cpu|memory)?\s*$", re.IGNORECASE)


@dataclass
class Queues:
    pools: list[dict[str, Any]] = field(default_factory=list)  # [[workload.pools]] tables
    policy: str | None = None  # scheduler.policy, when the file names root's
    warnings: list[str] = field(default_factory=list)


def read(path: Path, cluster: tuple[float, float] | None = None) -> Queues:
    """``cluster``: total (cpu, GiB), for resources given as percentages."""
    text = read_text(path, MAX_BYTES)
    m = _DECLARATION.search(text)
    if m:
        line = text.count("\n", 0, m.start()) + 1
        raise TraceError(f"{path}: line {line}: a <!{m.group(1)}> declaration; expected an allocation file "
                         "without one (entity declarations are refused)")
    try:
        root = ET.fromstring(text)
    except ET.ParseError as err:
        line, col = err.position
        raise TraceError(f"{path}: line {line} column {col}: not well-formed XML: "
                         f"{str(err).split(':')[0]}") from None
    if root.tag != "allocations":
        raise TraceError(f"{path}: the document element is <{root.tag}>; expected <allocations>")
    reader = _Reader(path, cluster)
    default_policy: str | None = None
    for child in root:
        if child.tag in QUEUE_TAGS:
            if _name(child, path, "") == "root":
                reader.root_policy = _policy(child, path, "root") or reader.root_policy
                for sub in child:
                    if sub.tag in QUEUE_TAGS:
                        reader.queue(sub, "", 1)
                    elif sub.tag not in ("schedulingPolicy", "weight"):
                        reader.unsupported("root", sub.tag)
            else:
                reader.queue(child, "", 1)
        elif child.tag == "defaultQueueSchedulingPolicy":
            default_policy = _policy_text(child, path, "defaultQueueSchedulingPolicy")
        elif child.tag in _TOP_IGNORED:
            reader.unsupported("allocations", child.tag)
        else:
            reader.unknown("allocations", child.tag)
    out = Queues(reader.pools)
    policy = reader.root_policy or default_policy
    if policy is not None:
        out.policy = POLICIES[policy]
        if policy == "fair":
            out.warnings.append(f"{path}: root's policy `fair` (memory only) is scheduled as `drf` (cpu and "
                                "memory)")
    others = sorted({q for q, p in reader.queue_policies.items() if POLICIES[p] != (out.policy or "drf")})
    if others:
        out.warnings.append(f"{path}: queues with their own schedulingPolicy ({', '.join(others[:10])}): "
                            "not applied: the emulator schedules every pool with one policy, "
                            f"`{out.policy or 'drf'}`")
    if reader.ignored:
        named = "; ".join(f"<{tag}> ({', '.join(sorted(qs)[:5])})"
                          for tag, qs in sorted(reader.ignored.items()))
        out.warnings.append(f"{path}: not modelled, ignored: {named}")
    return out


class _Reader:
    def __init__(self, path: Path, cluster: tuple[float, float] | None) -> None:
        self.path = path
        self.cluster = cluster
        self.pools: list[dict[str, Any]] = []
        self.root_policy: str | None = None
        self.queue_policies: dict[str, str] = {}
        self.ignored: dict[str, set[str]] = {}

    def unsupported(self, where: str, tag: str) -> None:
        self.ignored.setdefault(tag, set()).add(where)

    def unknown(self, where: str, tag: str) -> None:
        self.ignored.setdefault(f"{tag} (unknown)", set()).add(where)

    def queue(self, el: ET.Element, parent: str, depth: int) -> None:
        if depth > MAX_DEPTH:
            raise TraceError(f"{self.path}: queue `{parent}`: queues nested more than {MAX_DEPTH} deep")
        if len(self.pools) >= MAX_QUEUES:
            raise TraceError(f"{self.path}: more than {MAX_QUEUES:,} queues; expected at most that")
        name = _name(el, self.path, parent)
        full = f"{parent}.{name}" if parent else name
        pool: dict[str, Any] = {"name": full, "parent": parent or "root"}
        self.pools.append(pool)
        for child in el:
            tag = child.tag
            if tag in QUEUE_TAGS:
                self.queue(child, full, depth + 1)
            elif tag == "weight":
                pool["weight"] = _number(child, self.path, full, positive=True)
            elif tag == "minResources":
                cpu, ram = self.resources(child, full)
                if cpu:
                    pool["min_cpu"] = cpu
                if ram:
                    pool["min_ram_gib"] = ram
            elif tag == "schedulingPolicy":
                self.queue_policies[full] = _policy_text(child, self.path,
                                                         f"queue `{full}` <schedulingPolicy>")
            elif tag == "maxResources":
                cpu, ram = self.resources(child, full)
                if cpu:
                    pool["max_cpu"] = cpu
                if ram:
                    pool["max_ram_gib"] = ram
            elif tag.startswith(("max", "min", "acl", "allow", "fairShare", "reservation")) or tag in (
                    "maxAMShare", "maxChildResources", "maxContainerAllocation"):
                self.unsupported(full, tag)
            else:
                self.unknown(full, tag)

    def resources(self, el: ET.Element, queue: str) -> tuple[float, float]:
        """``1024 mb, 2 vcores``, ``memory-mb=1024, vcores=2`` or percentages of the cluster."""
        text = (el.text or "").strip()
        where = f"{self.path}: queue `{queue}` <{el.tag}>"
        cpu = ram = 0.0
        for part in filter(None, (p.strip() for p in text.split(","))):
            if m := _AMOUNT.match(part):
                v, unit = float(m.group(1)), m.group(2).lower()
                if unit.startswith("vcore"):
                    cpu = v
                else:
                    ram = v if unit == "gb" else v / 1024
            elif m := _KEYED.match(part):
                v, key = float(m.group(2)), m.group(1).lower()
                if key == "vcores":
                    cpu = v
                else:
                    ram = v / 1024
            elif m := _PERCENT.match(part):
                if self.cluster is None:
                    raise TraceError(f"{where}: {text!r} is a share of the cluster; expected amounts "
                                     "(`1024 mb, 2 vcores`) or a cluster (--nodes or --node-count)")
                share, kind = float(m.group(1)) / 100, (m.group(2) or "").lower()
                if kind in ("", "cpu"):
                    cpu = round(share * self.cluster[0], 6)
                if kind in ("", "memory"):
                    ram = round(share * self.cluster[1], 6)
            else:
                raise TraceError(f"{where}: expected `X mb, Y vcores`, `memory-mb=X, vcores=Y` or "
                                 f"`X% cpu, Y% memory`, got {part[:40]!r}")
        if cpu > 1e9 or ram > 1e9:
            raise TraceError(f"{where}: expected at most 1e9 vcores and GiB, got {text[:40]!r}")
        return cpu, round(ram, 6)


def _name(el: ET.Element, path: Path, parent: str) -> str:
    name = (el.get("name") or "").strip()
    where = f"under `{parent}`" if parent else "at the top"
    if not name or "." in name or len(name) > 200:
        raise TraceError(f"{path}: a <{el.tag}> {where}: expected a `name` attribute without dots, "
                         f"got {name[:40]!r}")
    return name


def _number(el: ET.Element, path: Path, queue: str, positive: bool = False) -> float:
    text = (el.text or "").strip()
    try:
        v = float(text)
    except ValueError:
        v = float("nan")
    if not (0 < v <= 1e9 if positive else 0 <= v <= 1e9):
        raise TraceError(f"{path}: queue `{queue}` <{el.tag}>: expected a number > 0, got {text[:40]!r}")
    return v


def _policy_text(el: ET.Element, path: Path, where: str) -> str:
    text = (el.text or "").strip()
    key = text.rsplit(".", 1)[-1].lower()
    if key not in POLICIES:
        raise TraceError(f"{path}: {where}: expected fair, drf or fifo, got {text[:60]!r}")
    long_names = {"fairsharepolicy": "fair", "dominantresourcefairnesspolicy": "drf", "fifopolicy": "fifo"}
    return long_names.get(key, key)


def _policy(el: ET.Element, path: Path, queue: str) -> str | None:
    for child in el:
        if child.tag == "schedulingPolicy":
            return _policy_text(child, path, f"queue `{queue}` <schedulingPolicy>")
    return None


def apply(data: dict[str, Any], queues: Queues, source: Path, set_policy: bool = True) -> list[str]:
    """Add the pools to a scenario's data (and root's policy, when ``set_policy`` and the data
    names none); jobs queued as ``root.a`` go to pool ``a``. Warnings to print."""
    workload = data["workload"] = dict(data.get("workload") or {})
    declared = {p.get("name") for p in workload.get("pools", []) if isinstance(p, dict)}
    clash = sorted(str(p["name"]) for p in queues.pools if p["name"] in declared)
    if clash:
        raise TraceError(f"{source}: queues {', '.join(clash[:5])} are already [[workload.pools]]; expected "
                         "each pool declared once")
    workload["pools"] = [*workload.get("pools", []), *queues.pools]
    names = {p["name"] for p in queues.pools}
    unmatched: set[str] = set()
    ops = [dict(op) if isinstance(op, dict) else op for op in workload.get("operations", [])]
    for op in ops:
        pool = op.get("pool", "default") if isinstance(op, dict) else None
        if isinstance(pool, str) and pool.startswith("root.") and pool[5:] in names:
            op["pool"] = pool = pool[5:]
        if isinstance(pool, str) and pool not in names:
            unmatched.add(pool)
    if ops:
        workload["operations"] = ops
    scheduler = data.get("scheduler", {})
    if set_policy and queues.policy is not None and isinstance(scheduler, dict) and "policy" not in scheduler:
        data["scheduler"] = {**scheduler, "policy": queues.policy}
    warnings = list(queues.warnings)
    if unmatched and names:
        warnings.append(f"{source}: jobs in pools that are not its queues "
                        f"({', '.join(sorted(unmatched)[:10])}): "
                        "created under root with weight 1")
    return warnings


def cluster_total(data: dict[str, Any]) -> tuple[float, float] | None:
    """A scenario's cluster, total (cpu, GiB), for shares of it; None if its data does not say."""
    cluster = data.get("cluster")
    groups = cluster.get("nodes") if isinstance(cluster, dict) else None
    if not isinstance(groups, list):
        return None
    try:
        return (sum(float(g["count"]) * float(g["cpu"]) for g in groups),
                sum(float(g["count"]) * float(g["ram_gib"]) for g in groups))
    except (KeyError, TypeError, ValueError):
        return None
