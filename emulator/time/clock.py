"""Emulated time as the emulator's parts read it: clocks over a loop.

``virtual``: ``VirtualClock`` over the discrete-event core (``emulator.time.desloop``), or a plain
``LoopClock`` over the first design's loop. ``realtime``: ``RealClock`` over uvloop (when
available); emulated seconds run ``speed`` times faster than wall seconds.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from functools import partial
from operator import attrgetter
from typing import Any, Protocol

from emulator.time.desloop import ClockMode, DesLoop, Event, ProcessGate, VirtualCore, new_event_loop


class Cancellable(Protocol):
    def cancel(self) -> None: ...


class Scheduler(Protocol):
    """A clock as the harness's own parts use it: the time, and callbacks now or later."""

    def now(self) -> float: ...

    def call_later(self, delay: float, callback: Callable[..., Any], *args: Any) -> Cancellable: ...

    def call_soon(self, callback: Callable[..., Any], *args: Any) -> Cancellable: ...

    def call_soon_batched(self, callback: Callable[[Any], Any], item: Any) -> None:
        """``call_soon(callback, item)``; back-to-back calls to the same callback object may share
        one entry of the loop's queue (the order stays that of separate calls)."""


class LoopClock:
    """The one clock object every component gets (the ``Clock`` port of rm, ringmon and
    nodemanager); coroutines of the harness also ``sleep`` on it."""

    def __init__(self, loop: asyncio.AbstractEventLoop, speed: float = 1.0) -> None:
        if speed <= 0:
            raise ValueError("speed must be > 0")
        self._loop = loop
        self._speed = speed
        self._origin = loop.time()

    @property
    def speed(self) -> float:
        return self._speed

    def now(self) -> float:
        return (self._loop.time() - self._origin) * self._speed

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(max(0.0, seconds) / self._speed)

    async def sleep_until(self, t: float) -> None:
        await asyncio.sleep(max(0.0, t - self.now()) / self._speed)

    def call_later(self, delay: float, callback: Callable[..., Any], *args: Any) -> Cancellable:
        return self._loop.call_later(max(0.0, delay) / self._speed, callback, *args)

    def call_soon(self, callback: Callable[..., Any], *args: Any) -> asyncio.Handle:
        return self._loop.call_soon(callback, *args)

    def call_soon_batched(self, callback: Callable[[Any], Any], item: Any) -> None:
        self._loop.call_soon(callback, item)


# uvloop's timers count whole milliseconds: re-armed for what is left, a timer waits at least that.
_MIN_WALL_S = 0.001
_EARLY_S = 1e-9


class _Fired:
    """The handle of a timer that fired: cancelling it does nothing."""

    __slots__ = ()

    def cancel(self) -> None:
        pass


_FIRED = _Fired()


class RealTimer:
    """A real-time timer that never fires before its emulated time: uvloop rounds a delay to
    the millisecond and fires up to half a millisecond early, which at 20x is 10 emulated ms, and
    code that re-arms for "the rest of the interval" would then spin."""

    __slots__ = ("_args", "_callback", "_clock", "_handle", "_when")

    def __init__(
        self, clock: RealClock, when: float, callback: Callable[..., Any], args: tuple[Any, ...]
    ) -> None:
        self._clock = clock
        self._when = when
        self._callback = callback
        self._args = args
        self._handle: Cancellable = clock.loop.call_later(
            max(0.0, when - clock.now()) / clock.speed, self._fire
        )

    def cancel(self) -> None:
        self._handle.cancel()

    def _fire(self) -> None:
        clock = self._clock
        left = self._when - clock.now()
        if left > _EARLY_S:
            self._handle = clock.loop.call_later(max(left / clock.speed, _MIN_WALL_S), self._fire)
            return
        # Fired: drop the handle, whose callback is our own method (a reference cycle the garbage
        # collector would have to find, thousands a second in a busy RM), and what we carried.
        self._handle = _FIRED
        args, self._args = self._args, ()
        self._callback(*args)


class RealClock(LoopClock):
    """Emulated seconds run ``speed`` times faster than the loop's (wall) clock; timers never fire
    before their time."""

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        return self._loop

    def call_later(self, delay: float, callback: Callable[..., Any], *args: Any) -> Cancellable:
        return RealTimer(self, self.now() + max(0.0, delay), callback, args)

    async def sleep_until(self, t: float) -> None:
        while (left := t - self.now()) > _EARLY_S:
            await asyncio.sleep(max(left / self._speed, _MIN_WALL_S))

    async def sleep(self, seconds: float) -> None:
        await self.sleep_until(self.now() + seconds)


class EpochClock(RealClock):
    """A real-time clock whose emulated t = 0 is the Unix time ``epoch`` (shared by the processes
    of a run: the RM's and every node worker's)."""

    def __init__(self, loop: asyncio.AbstractEventLoop, speed: float, epoch: float) -> None:
        super().__init__(loop, speed)
        # Unix time is only used to agree on t = 0 across processes; emulated time then runs on
        # the loop's monotonic clock like any LoopClock.
        self._origin = loop.time() + (epoch - unix_time())


class VirtualClock(LoopClock):
    """The clock of the discrete-event core: speed 1, ``now()`` an attribute read, timers straight
    into the core's heap."""

    def __init__(self, loop: DesLoop) -> None:
        super().__init__(loop, 1.0)
        self._des = loop
        # The core's own methods, one call less per message and per timer (every in-memory send
        # and every timer takes these).
        self.call_soon_batched = loop.call_soon_batched  # type: ignore[method-assign]
        self.call_soon = loop.call_soon  # type: ignore[method-assign]
        self.call_later = loop.call_after  # type: ignore[method-assign]
        if self._origin == 0.0:
            # The time is the core's counter itself (``t - 0.0`` is ``t``): read in C, no Python
            # frame, for the many readings of every heartbeat.
            self.now = partial(attrgetter("_now"), loop)  # type: ignore[method-assign]

    def now(self) -> float:
        return self._des._now - self._origin

    def call_later(self, delay: float, callback: Callable[..., Any], *args: Any) -> Cancellable:
        return self._des.call_after(delay, callback, *args)

    def gated(self, gate: ProcessGate) -> Callable[..., Event]:
        """``call_later`` for code inside the process of ``gate``: its timers are held while the
        process is paused (``DesLoop.call_gated``)."""
        return partial(self._des.call_gated, gate)


def clock_for(loop: asyncio.AbstractEventLoop, mode: ClockMode, speed: float = 1.0) -> LoopClock:
    if mode == "realtime":
        return RealClock(loop, speed)
    return VirtualClock(loop) if isinstance(loop, DesLoop) else LoopClock(loop)


def run(
    main: Callable[[LoopClock], Any], mode: ClockMode = "virtual", speed: float = 1.0,
    core: VirtualCore = "des",
) -> Any:
    """Run ``main(clock)`` (a coroutine function) to completion on a fresh loop of ``mode``
    (``core``: which loop runs virtual time)."""
    loop = new_event_loop(mode, core)
    try:
        asyncio.set_event_loop(loop)
        clock = clock_for(loop, mode, speed)
        return loop.run_until_complete(main(clock))
    finally:
        try:
            loop.run_until_complete(loop.shutdown_asyncgens())
        finally:
            asyncio.set_event_loop(None)
            loop.close()


def unix_time() -> float:
    """Seconds since the Unix epoch: what processes on several machines agree on (a run's epoch)."""
    return time.time()


# Wall-clock seconds, for measuring the emulator itself; never for emulated behaviour. (The C
# function itself: it is read twice per scheduler decision.)
wall_time: Callable[[], float] = time.perf_counter
