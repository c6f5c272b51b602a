"""What the RM needs from its environment: a clock with timers, links to nodes, a logger.

The harness implements these (virtual or real time, in-memory or TCP links); the RM never
imports it. Nothing here blocks: the RM is driven by the messages it receives and its timers.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol


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
