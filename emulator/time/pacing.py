"""A real-time clock that can be paused and re-paced while the run goes on (for live viewing).

``LoopClock`` in real time maps emulated time straight onto the loop's clock, so every timer of
the run sits in the loop's own heap and nothing can stop them. ``PacedClock`` keeps the run's
timers in a heap of its own, keyed by emulated time, and arms a single loop timer for the earliest
one. Pausing cancels that one timer and freezes ``now()``; resuming re-arms it. Whatever else
runs on the loop (the status page's web server) keeps running in wall time meanwhile.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
from collections.abc import Callable
from typing import Any

from emulator.time.clock import LoopClock

# Timers due within this many emulated seconds of now fire together (float rounding of the
# wall <-> emulated mapping would otherwise re-arm a timer for a nanosecond).
_SLACK_S = 1e-9
_MIN_WALL_S = 0.001


class PacedTimer:
    """What ``PacedClock.call_later`` returns (``rm.ports.Timer``)."""

    __slots__ = ("_args", "_callback", "cancelled", "when")

    def __init__(self, when: float, callback: Callable[..., Any], args: tuple[Any, ...]) -> None:
        self.when = when
        self._callback = callback
        self._args = args
        self.cancelled = False

    def cancel(self) -> None:
        self.cancelled = True

    def fire(self) -> None:
        if not self.cancelled:
            self.cancelled = True
            self._callback(*self._args)


class PacedClock(LoopClock):
    """Emulated seconds = ``speed`` x wall seconds, minus paused spans; pausable and re-paceable."""

    def __init__(self, loop: asyncio.AbstractEventLoop, speed: float = 1.0) -> None:
        super().__init__(loop, speed)
        self._loop = loop
        self._base_emu = 0.0
        self._base_wall = loop.time()
        self._paused = False
        self._heap: list[tuple[float, int, PacedTimer]] = []
        self._seq = itertools.count()
        self._armed: asyncio.TimerHandle | None = None
        self._armed_for = float("inf")

    # ---- time ---------------------------------------------------------------------------

    @property
    def paused(self) -> bool:
        return self._paused

    def now(self) -> float:
        if self._paused:
            return self._base_emu
        return self._base_emu + (self._loop.time() - self._base_wall) * self._speed

    def pause(self) -> bool:
        """Freeze emulated time; returns False if it was already paused."""
        if self._paused:
            return False
        self._base_emu = self.now()
        self._paused = True
        self._disarm()
        return True

    def resume(self) -> bool:
        if not self._paused:
            return False
        self._base_wall = self._loop.time()
        self._paused = False
        self._arm()
        return True

    def set_speed(self, speed: float) -> None:
        if speed <= 0:
            raise ValueError("speed must be > 0")
        self._base_emu = self.now()
        self._base_wall = self._loop.time()
        self._speed = speed
        self._disarm()
        self._arm()

    # ---- timers ---------------------------------------------------------------------------

    def call_later(self, delay: float, callback: Callable[..., Any], *args: Any) -> PacedTimer:
        timer = PacedTimer(self.now() + max(0.0, delay), callback, args)
        heapq.heappush(self._heap, (timer.when, next(self._seq), timer))
        if timer.when < self._armed_for:
            self._disarm()
            self._arm()
        return timer

    async def sleep(self, seconds: float) -> None:
        fut: asyncio.Future[None] = self._loop.create_future()
        timer = self.call_later(seconds, _wake, fut)
        try:
            await fut
        finally:
            timer.cancel()

    async def sleep_until(self, t: float) -> None:
        await self.sleep(t - self.now())

    def _disarm(self) -> None:
        if self._armed is not None:
            self._armed.cancel()
            self._armed = None
        self._armed_for = float("inf")

    def _arm(self) -> None:
        heap = self._heap
        while heap and heap[0][2].cancelled:
            heapq.heappop(heap)
        if self._paused or not heap or self._armed is not None:
            return
        when = heap[0][0]
        self._armed_for = when
        wall = self._base_wall + (when - self._base_emu) / self._speed
        if when > self.now() + _SLACK_S:
            # Not due yet: uvloop counts whole milliseconds, and fires a shorter wait at once.
            wall = max(wall, self._loop.time() + _MIN_WALL_S)
        self._armed = self._loop.call_at(wall, self._fire)

    def _fire(self) -> None:
        self._armed = None
        self._armed_for = float("inf")
        if self._paused:
            return
        now = self.now() + _SLACK_S
        heap = self._heap
        soon = self._loop.call_soon
        # Each due timer runs as its own loop callback, in (emulated time, order) order, so an
        # exception in one goes to the loop's handler exactly as with loop.call_later.
        while heap and heap[0][0] <= now:
            timer = heapq.heappop(heap)[2]
            if not timer.cancelled:
                soon(timer.fire)
        self._arm()


def _wake(fut: asyncio.Future[None]) -> None:
    if not fut.done():
        fut.set_result(None)
