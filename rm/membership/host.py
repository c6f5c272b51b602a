"""What the membership service needs of the RM (the RM shell implements it)."""

from __future__ import annotations

from collections.abc import Collection
from typing import Protocol

from ringmon.protocol import RingMessage
from rm.state.cluster import NodeRecord


class MembershipHost(Protocol):
    """What the membership service needs of the RM."""

    @property
    def epoch(self) -> int:
        """How many times the RM restarted (ring versions of a new life start above the old)."""
        ...

    def node(self, machine_id: int) -> NodeRecord | None: ...

    def nodes(self) -> Collection[NodeRecord]: ...

    def remove_node(self, node: NodeRecord, reason: str) -> None: ...

    def enqueue(self, msg: RingMessage) -> None:
        """Queue ``msg`` behind the RM's inbound work (handled by ``handle`` in turn)."""
        ...
