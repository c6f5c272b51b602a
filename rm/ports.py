"""What the RM needs from its environment: a clock with timers, links to nodes, a logger.

The harness implements these (virtual or real time, in-memory or TCP links); the RM never
imports it. Nothing here blocks: the RM is driven by the messages it receives and its timers.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from ringmon.protocol import RingMessage
    from rm.state.cluster import NodeRecord


class Timer(Protocol):
    def cancel(self) -> None: ...


class Clock(Protocol):
    """Emulated time in seconds since the start of the run, and timers on it."""

    def now(self) -> float: ...

    def call_later(self, delay: float, callback: Callable[..., object], *args: Any) -> Timer: ...


class Link(Protocol):
    """The RM's end of one node's connection. ``send`` never blocks and never re-enters."""

    def send(self, msg: Any) -> None: ...

    def close(self) -> None: ...

    @property
    def closed(self) -> bool: ...


class Log(Protocol):
    """A structlog-style logger: an event name and key-value fields."""

    def info(self, event: str, **fields: Any) -> Any: ...

    def warning(self, event: str, **fields: Any) -> Any: ...

    def error(self, event: str, **fields: Any) -> Any: ...


class MembershipHost(Protocol):
    """What the membership service needs of the RM."""

    @property
    def epoch(self) -> int:
        """How many times the RM restarted (ring versions of a new life start above the old)."""
        ...

    def node(self, machine_id: int) -> NodeRecord | None: ...

    def nodes(self) -> Iterable[NodeRecord]: ...

    def remove_node(self, node: NodeRecord, reason: str) -> None: ...

    def enqueue(self, msg: RingMessage) -> None:
        """Queue ``msg`` behind the RM's inbound work (handled by ``handle`` in turn)."""
        ...
