"""Emulated time.

``virtual``: a stdlib selector loop whose ``time()`` is a counter. When no callback is ready and
no file descriptor has an event, the loop jumps straight to the next timer instead of sleeping.
Callbacks run in (time, scheduling order), so a run is a pure function of the scenario and seed.

``realtime``: uvloop (when available); emulated seconds run ``speed`` times faster than wall
seconds.
"""

from __future__ import annotations

import asyncio
import contextvars
import heapq
import selectors
import time
from collections import deque
from collections.abc import Callable
from functools import partial
from operator import attrgetter
from typing import Any, Literal, Protocol

import msgspec

Ctx = contextvars.Context | None

ClockMode = Literal["virtual", "realtime"]
# Which loop runs virtual time: the discrete-event core, or asyncio's loop (the first design).
VirtualCore = Literal["des", "asyncio"]


class _JumpingSelector(selectors.DefaultSelector):
    def __init__(self, loop_ref: list[AsyncioVirtualLoop]) -> None:
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


class AsyncioVirtualLoop(asyncio.SelectorEventLoop):
    """The first virtual-time core: asyncio's own loop with a jumping clock (an asyncio ``Handle``
    per callback, a ``TimerHandle`` per timer). Kept for comparison: the bench study's
    ``design = "asyncio"``."""

    def __init__(self) -> None:
        ref: list[AsyncioVirtualLoop] = []
        super().__init__(_JumpingSelector(ref))
        ref.append(self)
        self._virtual_now = 0.0

    def time(self) -> float:
        return self._virtual_now

    def advance(self, seconds: float) -> None:
        self._virtual_now += seconds


# asyncio's own thresholds for sweeping cancelled timers out of the heap: more than this many
# timers, and more than half of them cancelled.
_SWEEP_MIN_TIMERS = 100
# A pure virtual run never polls the self-pipe, where Ctrl-C / SIGTERM land: look every 1,024
# passes (an empty poll changes nothing the run does).
_SIGNAL_CHECK_MASK = 1023


class ProcessGate(Protocol):
    """What the clocks use of an emulated process's gate (``emulator.harness.nodeproc``'s): a
    gated timer runs through it, held in order while the process is paused."""

    _held: Any  # None while the process runs

    def run(self, fn: Callable[..., object], *args: Any) -> None: ...


class Event(msgspec.Struct, eq=False):
    """A callback due now (``call_soon``) or at ``when`` (a timer): what the discrete-event core
    keeps instead of asyncio's handles. Cancelling clears the callback; the entry is skipped.
    A Struct, made in C (a Python ``__init__`` was a frame per timer); compared by identity."""

    loop: DesLoop | None  # while in the core's heap: a cancel counts among its cancelled timers
    _when: float
    fn: Callable[..., Any] | None
    args: tuple[Any, ...]
    ctx: Ctx
    # The gate of the process the timer runs in (``call_gated``): while the process is paused
    # the callback goes to the gate, as ``gate.run(fn, *args)`` would take it.
    gate: ProcessGate | None = None

    def cancel(self) -> None:
        if self.fn is not None:
            self.fn = None
            self.args = ()
            if self.loop is not None:
                self.loop._cancelled_timers += 1

    def cancelled(self) -> bool:
        return self.fn is None

    def when(self) -> float:
        return self._when


class Due(float):
    """A heap entry: the event's time, carrying the event. Compared as the float it is (in C, and
    one object less to reach than a ``(time, event)`` tuple): at equal times neither is less, as
    asyncio's heap of TimerHandles (compared by time alone) has it, so ties keep its places."""

    __slots__ = ("ev",)
    ev: Event


def _due(when: float, ev: Event) -> Due:
    entry = Due(when)
    entry.ev = ev
    return entry


class Batch(list[Any]):
    """Calls of one callback queued back to back within a loop pass: one ready-queue entry that
    runs ``fn(item)`` for each of its items in order, as separate entries would have run. (A
    list itself: made in C, no Python ``__init__`` per message.)"""

    __slots__ = ("fn", "open")
    fn: Callable[[Any], Any]
    # Closed once a pass has counted it among the callbacks it runs: a later call would run
    # in that pass instead of the next.
    open: bool


class DesLoop(asyncio.SelectorEventLoop):
    """The discrete-event core for virtual time: a plain heap of ``(time, event)`` entries
    and a FIFO of ready events, run as asyncio's loop runs them (ready callbacks in batches, then
    timers due within the clock's resolution), so coroutines, futures and tasks work unchanged.
    No selector poll while only the loop's self-pipe is registered; time jumps to the next timer.

    Every callback runs in the order ``AsyncioVirtualLoop`` runs it, ties included (timers due at
    the same instant keep asyncio's heap order, which is deterministic but not insertion order):
    a scenario and seed give byte-identical results on both cores."""

    def __init__(self) -> None:
        super().__init__(selectors.DefaultSelector())
        self._now = 0.0
        self._heap: list[Due] = []
        self._cancelled_timers = 0
        # asyncio's own ready queue (run_forever and I/O callbacks use it), and its loop state.
        self._queue: deque[Any] = vars(self)["_ready"]
        self._resolution: float = vars(self)["_clock_resolution"]
        self._io: selectors.BaseSelector = vars(self)["_selector"]

    def time(self) -> float:
        return self._now

    def call_soon(  # type: ignore[override]
        self, callback: Callable[..., Any], *args: Any, context: Ctx = None
    ) -> Any:
        ev = Event(None, 0.0, callback, args, context)
        self._queue.append(ev)
        return ev

    def call_soon_batched(self, callback: Callable[[Any], Any], item: Any) -> None:
        """``call_soon(callback, item)``, sharing the queue entry of the call just before if it
        was to the same callback (the same object) in this pass: same order, one entry."""
        queue = self._queue
        if queue:
            last = queue[-1]
            if type(last) is Batch and last.fn is callback and last.open:
                last.append(item)
                return
        batch = Batch((item,))
        batch.fn = callback
        batch.open = True
        queue.append(batch)

    def call_at(  # type: ignore[override]
        self, when: float, callback: Callable[..., Any], *args: Any, context: Ctx = None
    ) -> Any:
        ev = Event(self, when, callback, args, context)
        heapq.heappush(self._heap, _due(when, ev))
        return ev

    def call_later(  # type: ignore[override]
        self, delay: float, callback: Callable[..., Any], *args: Any, context: Ctx = None
    ) -> Any:
        ev = Event(self, self._now + delay, callback, args, context)
        heapq.heappush(self._heap, _due(ev._when, ev))
        return ev

    def call_after(self, delay: float, callback: Callable[..., Any], *args: Any) -> Event:
        """``call_later`` with a negative delay taken as 0 (the clock's timers: one call less per
        timer than clamping in the clock; ``now + 0.0`` is ``now``)."""
        now = self._now
        when = now + delay if delay > 0.0 else now
        ev = Event(self, when, callback, args, None)
        entry = Due(when)
        entry.ev = ev
        heapq.heappush(self._heap, entry)
        return ev

    def call_gated(self, gate: ProcessGate, delay: float, callback: Callable[..., Any], *args: Any) -> Event:
        """``call_after(delay, gate.run, callback, *args)`` in one event: the loop asks the gate
        whether its process runs (no call through it when it does; held when it is paused). The
        same time, the same heap entry: the same order."""
        now = self._now
        when = now + delay if delay > 0.0 else now
        ev = Event(self, when, callback, args, None, gate)
        entry = Due(when)
        entry.ev = ev
        heapq.heappush(self._heap, entry)
        return ev

    def _run_once(self) -> None:
        """asyncio's loop iteration, repeated here while no I/O is registered and nobody asked
        the loop to stop (what ``run_forever`` would do, without its call per iteration)."""
        heap, queue, state = self._heap, self._queue, vars(self)
        # The registered file descriptors (the selector's own dict: its ``get_map()`` view costs a
        # Python call per ``len``, once per pass).
        fds: dict[Any, Any] = vars(self._io)["_fd_to_key"]
        pop, res = heapq.heappop, self._resolution
        # Module constants and classes as locals: read every pass (~3 per heartbeat).
        sweep_min, signal_mask, batch_type, event_type = _SWEEP_MIN_TIMERS, _SIGNAL_CHECK_MASK, Batch, Event
        passes = 0
        # The pass before left ready callbacks, no I/O is registered, no signal check is due and
        # nobody asked to stop: the next pass skips the poll and the time jump (none happens with
        # callbacks ready) and goes from its cancelled timers to its due ones.
        ready = False
        while True:
            # No cancelled timer counted: none is in the heap (the count covers every one there).
            cancelled = self._cancelled_timers
            if not cancelled:
                pass
            # A cancelled timer is nearly always in the heap: this is read every pass. (``2c > n``:
            # asyncio's ``c > 0.5 * n``, exact for integers.)
            elif cancelled + cancelled > (n := len(heap)) and n > sweep_min:
                heap[:] = [e for e in heap if e.ev.fn is not None]
                heapq.heapify(heap)
                self._cancelled_timers = 0
            else:
                while heap and heap[0].ev.fn is None:
                    pop(heap)
                    self._cancelled_timers -= 1
            if not ready:
                idle = not queue and not state["_stopping"]
                events = None
                io = len(fds) > 1
                passes += 1
                if io or (idle and not heap) or not passes & signal_mask:
                    # Real I/O is registered (or nothing at all is scheduled: only I/O can wake us), or
                    # it is time to look for a signal on the self-pipe.
                    events = self._io.select(None if idle and not heap else 0.0)
                    self._process_events(events)  # type: ignore[attr-defined]
                if idle and heap and not events:
                    # Jump to the next timer (as ``now += timeout`` did, to keep the same float sums).
                    # (``max(0.0, gap)`` without its call: the same value, NaN and -0.0 included.)
                    gap = heap[0] - self._now
                    self._now += gap if gap > 0.0 else 0.0
            end = self._now + res
            while heap and heap[0] < end:
                ev = pop(heap).ev
                # Out of the heap: a later cancel is not one of its cancelled timers. (A cancelled
                # timer leaving here stays counted, as in asyncio: the sweeps happen when they did.)
                ev.loop = None
                queue.append(ev)
            if queue:
                last = queue[-1]
                if type(last) is batch_type:
                    last.open = False
            for _ in range(len(queue)):
                ev = queue.popleft()
                kind = type(ev)  # once per entry: two of a heartbeat's three are batches
                if kind is batch_type:
                    # Run here, not in a method: most batches are one message.
                    each = ev.fn
                    for item in ev:
                        try:
                            each(item)
                        except (SystemExit, KeyboardInterrupt):
                            raise
                        except BaseException as exc:
                            self.call_exception_handler(
                                {"message": f"Exception in callback {each!r}", "exception": exc}
                            )
                    continue
                if kind is not event_type:
                    if not ev._cancelled:
                        ev._run()
                    continue
                fn = ev.fn
                if fn is None:
                    continue
                gate = ev.gate
                if gate is not None and gate._held is not None:
                    gate.run(fn, *ev.args)  # its process is paused: held there, in order
                    continue
                try:
                    if ev.ctx is None:
                        fn(*ev.args)
                    else:
                        ev.ctx.run(fn, *ev.args)
                except (SystemExit, KeyboardInterrupt):
                    raise
                except BaseException as exc:
                    self.call_exception_handler(
                        {"message": f"Exception in callback {fn!r}", "exception": exc, "handle": ev}
                    )
            if io or state["_stopping"] or not (queue or heap):
                return
            # (No ``bool()`` calls: two builtin calls a pass.)
            if queue and len(fds) <= 1 and (passes + 1) & signal_mask:
                ready = True
                passes += 1
            else:
                ready = False


def new_event_loop(mode: ClockMode, core: VirtualCore = "des") -> asyncio.AbstractEventLoop:
    if mode == "virtual":
        return DesLoop() if core == "des" else AsyncioVirtualLoop()
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
