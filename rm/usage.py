"""RM side of usage distinct from requests (design.md §3b): what a launch tells the node about
its task's usage process, and what the RM keeps of the usage nodes report."""

from __future__ import annotations

import msgspec

from rm.cluster import NodeRecord
from rm.observed import Observations
from rm.operations import Operation, Task
from rm.protocol import ContainerLaunch, ContainerUsage


def launch_for(cid: int, op: Operation, task: Task) -> ContainerLaunch:
    """The launch of ``task``: with the operation's usage model, seeded per task and attempt (a
    retried task draws afresh) and carrying the operation's tier."""
    usage = op.spec.usage
    if usage is not None:
        usage = msgspec.structs.replace(
            usage, seed=usage.seed * 1_000_003 + task.index * 1009 + task.attempts, tier=op.spec.tier
        )
    return ContainerLaunch(cid, op.demand, task.duration_s, usage)


def record_usage(node: NodeRecord, reports: tuple[ContainerUsage, ...], history: int) -> None:
    """A heartbeat's usage reports: the RM's latest view of each container's real usage, its
    recent history, and the node's total over time (a container without reports counts as its
    request)."""
    containers = node.containers
    for u in reports:
        alloc = containers.get(u.container_id)
        if alloc is not None:
            alloc.usage = u
            if alloc.observed is None:
                alloc.observed = Observations(history)
            alloc.observed.add(u.cpu, u.ram_gib)
    cpu = ram = 0.0
    for alloc in containers.values():
        if alloc.usage is not None:
            cpu += alloc.usage.cpu
            ram += alloc.usage.ram_gib
        else:
            cpu += alloc.op.demand.cpu
            ram += alloc.op.demand.ram_gib
    if node.usage_series is None:
        node.usage_series = Observations(history)
    node.usage_series.add(cpu, ram)
