"""What a NodeManager needs from its environment: a clock with timers, a way to send to the RM,
a logger, optionally a ring membership agent and a timing probe. The harness provides them."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from ringmon.protocol import Ring


class Timer(Protocol):
    def cancel(self) -> None: ...


class Clock(Protocol):
    def now(self) -> float: ...

    def call_later(self, delay: float, callback: Callable[..., object], *args: Any) -> Timer: ...


class Log(Protocol):
    def info(self, event: str, **fields: Any) -> Any: ...

    def warning(self, event: str, **fields: Any) -> Any: ...


# Sends one message on the node's RM connection (never blocks, never re-enters).
Send = Callable[[Any], None]


class MembershipAgent(Protocol):
    """The node's part in the ring (``ringmon.monitor.RingMonitor``), driven by registration."""

    def join(self, machine_id: int, ring: Ring | None) -> None:
        """Registered as ``machine_id``; ``ring`` is the RM's ring at that moment."""

    def leave(self) -> None:
        """Not (or no longer) registered: stop sending and watching."""


class TimingProbe(Protocol):
    """Where a node reports the timing of its heartbeats (the harness measures lag with it)."""

    def tick(self, late_s: float) -> None:
        """A heartbeat tick ran ``late_s`` after it was due (0 when on time)."""

    def sent(self, t: float) -> None:
        """A heartbeat left at ``t``."""

    def answered(self, sent_at: float, t: float) -> None:
        """The heartbeat sent at ``sent_at`` was answered at ``t``."""
