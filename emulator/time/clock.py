"""Emulated time.

``virtual``: a stdlib selector loop whose ``time()`` is a counter. When no callback is ready and
no file descriptor has an event, the loop jumps straight to the next timer instead of sleeping.
Callbacks run in (time, scheduling order), so a run is a pure function of the scenario and seed.

``realtime``: uvloop (when available); emulated seconds run ``speed`` times faster than wall
seconds.
"""

from __future__ import annotations

import asyncio
import selectors
import time
from collections.abc import Callable
from typing import Any, Literal, Protocol

ClockMode = Literal["virtual", "realtime"]


class _JumpingSelector(selectors.DefaultSelector):
    def __init__(self, loop_ref: list[VirtualTimeLoop]) -> None:
        super().__init__()
        self._loop_ref = loop_ref

    def select(self, timeout: float | None = None) -> list[tuple[selectors.SelectorKey, int]]:
        if timeout is None:
            # Nothing is scheduled at all: only another thread (or real I/O) can wake us.
            return super().select(None)
        # With only the loop's self-pipe registered no real I/O can be pending; skip the syscall.
        events = super().select(0) if len(self.get_map()) > 1 or timeout <= 0 else []
        if not events and timeout > 0:
            self._loop_ref[0].advance(timeout)
        return events


class VirtualTimeLoop(asyncio.SelectorEventLoop):
    def __init__(self) -> None:
        ref: list[VirtualTimeLoop] = []
        super().__init__(_JumpingSelector(ref))
        ref.append(self)
        self._virtual_now = 0.0

    def time(self) -> float:
        return self._virtual_now

    def advance(self, seconds: float) -> None:
        self._virtual_now += seconds


def new_event_loop(mode: ClockMode) -> asyncio.AbstractEventLoop:
    if mode == "virtual":
        return VirtualTimeLoop()
    try:
        import uvloop
    except ImportError:  # pragma: no cover - uvloop is a declared dependency
        return asyncio.new_event_loop()
    return uvloop.new_event_loop()


class Cancellable(Protocol):
    def cancel(self) -> None: ...


class Scheduler(Protocol):
    """A clock as the harness's own parts use it: the time, and callbacks now or later."""

    def now(self) -> float: ...

    def call_later(self, delay: float, callback: Callable[..., Any], *args: Any) -> Cancellable: ...

    def call_soon(self, callback: Callable[..., Any], *args: Any) -> Cancellable: ...


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


# uvloop's timers count whole milliseconds: re-armed for what is left, a timer waits at least that.
_MIN_WALL_S = 0.001
_EARLY_S = 1e-9


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
        self._handle = clock.loop.call_later(max(0.0, when - clock.now()) / clock.speed, self._fire)

    def cancel(self) -> None:
        self._handle.cancel()

    def _fire(self) -> None:
        clock = self._clock
        left = self._when - clock.now()
        if left > _EARLY_S:
            self._handle = clock.loop.call_later(max(left / clock.speed, _MIN_WALL_S), self._fire)
            return
        # Fired, this timer and its handle form a reference cycle that lives until the garbage
        # collector runs (rarely, in a real-time run): it must not keep what it carried alive.
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


def run(main: Callable[[LoopClock], Any], mode: ClockMode = "virtual", speed: float = 1.0) -> Any:
    """Run ``main(clock)`` (a coroutine function) to completion on a fresh loop of ``mode``."""
    loop = new_event_loop(mode)
    try:
        asyncio.set_event_loop(loop)
        clock = LoopClock(loop) if mode == "virtual" else RealClock(loop, speed)
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


def wall_time() -> float:
    """Wall-clock seconds, for measuring the emulator itself; never for emulated behaviour."""
    return time.perf_counter()
