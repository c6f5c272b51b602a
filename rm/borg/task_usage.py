"""RM side of usage distinct from requests (design.md §3b): what a launch tells the node about
its task's usage process, and what the RM keeps of the usage nodes report."""

from __future__ import annotations

from collections.abc import Iterable

import msgspec

from rm.borg.autopilot import Autopilot
from rm.protocol import ContainerLaunch, ContainerLimits, ContainerUsage, UpdateLimits
from rm.queues.outbox import Outbox
from rm.state.cluster import NodeRecord
from rm.state.observed_usage import Observations
from rm.state.operations import Operation, Task


def launch_for(cid: int, op: Operation, task: Task, autopilot: Autopilot | None = None) -> ContainerLaunch:
    """The launch of ``task``: with the operation's usage model, seeded per task and attempt (a
    retried task draws afresh), carrying the operation's tier and, under Autopilot, the limits
    it recommends for the group now."""
    usage = op.spec.usage
    if usage is not None:
        limits = autopilot.limits(op.group) if autopilot is not None and usage.autopilot else None
        usage = msgspec.structs.replace(
            usage, seed=usage.seed * 1_000_003 + task.index * 1009 + task.attempts, tier=op.spec.tier,
            cpu_limit=limits.cpu if limits else usage.cpu_limit,
            ram_limit_gib=limits.ram_gib if limits else usage.ram_limit_gib,
        )
    return ContainerLaunch(cid, op.demand, task.duration_s, usage)


def record_usage(
    node: NodeRecord, reports: tuple[ContainerUsage, ...], history: int, autopilot: Autopilot | None = None,
    now: float | None = None,
) -> None:
    """A heartbeat's usage reports: the RM's latest view of each container's real usage and its
    recent history; Autopilot's histograms take them too. ``now``: the CPU each container used
    since its last report is counted too (what preemption loses; None: not counted).

    A delta heartbeat reports only containers whose usage moved; the others' usage is still what
    they last reported, and they get that sample again, so the histories of one node stay aligned
    sample by sample (what emp-perc and gpa-sqrt add up). A periodic heartbeat reports them all."""
    containers = node.containers
    if reports and len(reports) < len(containers):
        reported = {u.container_id for u in reports}
        for cid, other in containers.items():
            if cid not in reported and other.usage is not None and other.observed is not None:
                other.observed.add(other.usage.cpu, other.usage.ram_gib)
    for u in reports:
        alloc = containers.get(u.container_id)
        if alloc is not None:
            if now is not None:
                alloc.report_usage(u, now)
            else:
                alloc.usage = u
            if alloc.observed is None:
                alloc.observed = Observations(history)
            alloc.observed.add(u.cpu, u.ram_gib)
            spec = alloc.op.spec.usage
            if autopilot is not None and spec is not None and spec.autopilot:
                autopilot.group(alloc.op.group, alloc.op.demand, spec.job_class, spec.oom_tolerance).observe(
                    u.cpu, u.ram_gib
                )


def apply_limits(nodes: Iterable[NodeRecord], autopilot: Autopilot, groups: list[str], outbox: Outbox) -> int:
    """Send running containers of ``groups`` their group's new limits; returns how many."""
    wanted = set(groups)
    sent = 0
    for node in nodes:
        batch = []
        for alloc in node.containers.values():
            spec = alloc.op.spec.usage
            if alloc.op.group in wanted and spec is not None and spec.autopilot:
                lim = autopilot.limits(alloc.op.group)
                if lim is not None:
                    batch.append(ContainerLimits(alloc.container_id, lim.cpu, lim.ram_gib))
        if batch:
            outbox.send(node.link, UpdateLimits(limits=tuple(batch)))
            sent += len(batch)
    return sent
