"""What a scheduling policy is: given a node with free resources, which operation starts next."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Protocol

from rm.cluster import Cluster, NodeRecord
from rm.operations import Operation, Pool


class PolicyStats:
    """Counters a policy with refusals keeps (zero for policies that never refuse)."""

    __slots__ = ("by_group", "fallback_allocations", "refusals")

    def __init__(self) -> None:
        self.refusals = 0
        self.fallback_allocations = 0
        # workload group -> [offers, accepted, refused] of the packing controllers
        self.by_group: dict[str, list[int]] = {}


class Policy(Protocol):
    stats: PolicyStats

    def candidates(self, node: NodeRecord) -> Iterator[Operation]:
        """Operations with a pending task that fits ``node``, most deserving first."""
        ...

    def assign(self, node: NodeRecord) -> Operation | None:
        """The operation that gets the node's next task, or None to stop filling this node."""
        ...

    def on_submitted(self, op: Operation) -> None: ...

    def on_finished(self, op: Operation) -> None: ...

    def begin_fill(self, node: NodeRecord) -> None: ...


class PolicyBase:
    def __init__(self, root: Pool, cluster: Cluster) -> None:
        self.root = root
        self.cluster = cluster
        self.stats = PolicyStats()

    def candidates(self, node: NodeRecord) -> Iterator[Operation]:  # pragma: no cover - abstract
        raise NotImplementedError

    def assign(self, node: NodeRecord) -> Operation | None:
        return next(self.candidates(node), None)

    def on_submitted(self, op: Operation) -> None:
        """An operation joined its pool."""

    def on_finished(self, op: Operation) -> None:
        """An operation left its pool."""

    def begin_fill(self, node: NodeRecord) -> None:
        """A node update starts offering ``node``'s free resources."""
