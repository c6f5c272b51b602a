"""What the RM, the NodeManagers and the ring need from their environment.

The harness (``emulator``) implements these: a clock (virtual or real time) and the links a
transport provides. System packages depend only on these protocols, never on the harness.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol


class Timer(Protocol):
    def cancel(self) -> None: ...


class Clock(Protocol):
    """Emulated time in seconds since the start of the run."""

    def now(self) -> float: ...

    async def sleep(self, seconds: float) -> None: ...

    async def sleep_until(self, t: float) -> None: ...

    def call_later(self, delay: float, callback: Callable[..., Any], *args: Any) -> Timer: ...


class Link(Protocol):
    """One end of a bidirectional message channel. ``send`` never blocks and never re-enters."""

    def send(self, msg: Any) -> None: ...

    def close(self) -> None: ...

    @property
    def closed(self) -> bool: ...
