"""What a scheduling policy is: given a node with free resources, which operation starts next;
or, for node-choosing policies (``chooses_nodes``), which operation starts on which node."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import ClassVar, Protocol

import msgspec

from rm.ports import Clock
from rm.scheduler.config import SchedulerConfig
from rm.state.cluster import Cluster, NodeRecord
from rm.state.operations import Operation, Pool


class OfferCounts(msgspec.Struct):
    """Offers a workload group's packing controllers saw, and what they did with them."""

    offers: int = 0
    accepted: int = 0
    refused: int = 0


class PolicyCounters(msgspec.Struct):
    """Counters a policy with refusals keeps (zero for policies that never refuse)."""

    refusals: int = 0
    fallback_allocations: int = 0
    # workload group -> its operations' packing offers
    by_group: dict[str, OfferCounts] = msgspec.field(default_factory=dict)


class NoParams(msgspec.Struct, forbid_unknown_fields=True, kw_only=True, frozen=True):
    """The parameters of a policy that has none of its own: ``[scheduler.params]`` must be empty."""


class Policy(Protocol):
    """What the RM's scheduling loop runs: a registered policy (``RegisteredPolicy``), or the
    layer wrapped around one (tiers) or put in its place (placement; rm/borg/layer.py)."""

    # True: the scheduler asks ``place`` for (operation, node) pairs over the whole cluster
    # instead of filling one node at a time with ``assign``.
    chooses_nodes: ClassVar[bool]

    def __init__(
        self, root: Pool, cluster: Cluster, config: SchedulerConfig, clock: Clock, counters: PolicyCounters,
        params: msgspec.Struct | None = None,
    ) -> None:
        """``params``: an instance of ``Params`` (None: ``Params()``, its defaults)."""

    def candidates(self, node: NodeRecord) -> Iterator[Operation]:
        """Operations with a pending task that fits ``node``, most deserving first."""
        ...

    def assign(self, node: NodeRecord) -> Operation | None:
        """The operation that gets the node's next task, or None to stop filling this node."""
        ...

    def place(self, nodes: Iterable[NodeRecord]) -> tuple[Operation, NodeRecord] | None:
        """Node-choosing policies: the next (operation, node); None when nothing more fits."""
        ...

    def on_submitted(self, op: Operation) -> None: ...

    def on_finished(self, op: Operation) -> None: ...

    def begin_fill(self, node: NodeRecord) -> None: ...


class RegisteredPolicy(Policy, Protocol):
    """A policy the RM finds by name (``scheduler.policy``): a built-in or a plug-in registered
    under the entry-point group ``hbemu.policies`` (rm/scheduler/registry.py, docs/extending.md)."""

    # The policy's own parameters, decoded from ``[scheduler.params]`` (unknown fields refused).
    Params: ClassVar[type[msgspec.Struct]]
    # True: a pool or operation below its min share is always offered resources first (the
    # conformance suite, tests/unit/test_policy_conformance.py, holds the policy to it).
    honours_min_share: ClassVar[bool]


class PolicyBase:
    """Fill-one-node policies: ``assign`` takes the first candidate."""

    chooses_nodes: ClassVar[bool] = False
    Params: ClassVar[type[msgspec.Struct]] = NoParams
    honours_min_share: ClassVar[bool] = False

    def __init__(
        self, root: Pool, cluster: Cluster, config: SchedulerConfig, clock: Clock, counters: PolicyCounters,
        params: msgspec.Struct | None = None,
    ) -> None:
        self.root = root
        self.cluster = cluster
        self.config = config
        self.clock = clock
        self.counters = counters
        self.options = params if params is not None else self.Params()

    def candidates(self, node: NodeRecord) -> Iterator[Operation]:  # pragma: no cover - abstract
        raise NotImplementedError

    def assign(self, node: NodeRecord) -> Operation | None:
        return next(self.candidates(node), None)

    def place(self, nodes: Iterable[NodeRecord]) -> tuple[Operation, NodeRecord] | None:
        raise TypeError(f"{type(self).__name__} fills one node at a time; it does not choose nodes")

    def on_submitted(self, op: Operation) -> None:
        """An operation joined its pool."""

    def on_finished(self, op: Operation) -> None:
        """An operation left its pool."""

    def begin_fill(self, node: NodeRecord) -> None:
        """A node update starts offering ``node``'s free resources (only while a task is
        pending: with none, nothing is offered and no fill begins)."""
