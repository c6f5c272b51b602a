"""The loops that run emulated time.

``DesLoop``, the discrete-event core: an asyncio loop whose ``time()`` is a counter and whose timers
are events in one heap; when nothing is ready it jumps straight to the next event instead of
sleeping, and callbacks run in (time, scheduling order), so a run is a pure function of the
scenario and seed. ``AsyncioVirtualLoop``: the first design, asyncio's own loop with a jumping
clock, kept for comparison. ``new_event_loop`` picks one, or uvloop for real time.
"""

from __future__ import annotations

import asyncio
import contextvars
import heapq
import selectors
from collections import deque
from collections.abc import Callable
from typing import Any, Literal, Protocol

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


class Event(float):
    """A callback due now (``call_soon``) or at a time (a timer), kept instead of asyncio's
    handles. A timer is its own heap entry, the float of its time (compared in C and by time
    alone, as asyncio's TimerHandles: ties keep its places): one object per timer. Cancelling
    clears the callback; the entry is skipped. A handle is for cancelling, not for comparing
    (``==`` compares times) or collecting (unhashable: a set of them fails loudly)."""

    __slots__ = ("args", "ctx", "fn", "gate", "loop")
    loop: DesLoop | None  # while in the core's heap: a cancel counts among its cancelled timers
    fn: Callable[..., Any] | None
    args: tuple[Any, ...]
    ctx: Ctx
    # The gate of the process the timer runs in (``call_gated``): while the process is paused
    # the callback goes to the gate, as ``gate.run(fn, *args)`` would take it.
    gate: ProcessGate | None

    __hash__ = None  # type: ignore[assignment]

    def __bool__(self) -> bool:
        return True  # a handle, whatever its time (a float 0.0 would be false)

    def __repr__(self) -> str:
        return f"<Event when={float(self)!r} {self.fn!r}>"

    def cancel(self) -> None:
        if self.fn is not None:
            self.fn = None
            self.args = ()
            if self.loop is not None:
                self.loop._cancelled_timers += 1

    def cancelled(self) -> bool:
        return self.fn is None

    def when(self) -> float:
        return float(self)


def _event(when: float, loop: DesLoop | None, fn: Callable[..., Any], args: tuple[Any, ...],
           ctx: Ctx = None, gate: ProcessGate | None = None) -> Event:
    ev = Event(when)
    ev.loop = loop
    ev.fn = fn
    ev.args = args
    ev.ctx = ctx
    ev.gate = gate
    return ev


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
    """The discrete-event core for virtual time: a plain heap of timed events (each the float of its time)
    and a FIFO of ready events, run as asyncio's loop runs them (ready callbacks in batches, then
    timers due within the clock's resolution), so coroutines, futures and tasks work unchanged.
    No selector poll while only the loop's self-pipe is registered; time jumps to the next timer.

    Every callback runs in the order ``AsyncioVirtualLoop`` runs it, ties included (timers due at
    the same instant keep asyncio's heap order, which is deterministic but not insertion order):
    a scenario and seed give byte-identical results on both cores."""

    def __init__(self) -> None:
        super().__init__(selectors.DefaultSelector())
        self._now = 0.0
        self._heap: list[Event] = []
        self._cancelled_timers = 0
        # asyncio's own ready queue (run_forever and I/O callbacks use it), and its loop state.
        self._queue: deque[Any] = vars(self)["_ready"]
        self._resolution: float = vars(self)["_clock_resolution"]
        self._io: selectors.BaseSelector = vars(self)["_selector"]
        # A batched call made while nothing was ready (``call_soon_batched``): the loop's next
        # pass would run it first, so the pass running now runs it after its last entry when by
        # then nothing else is ready or due this instant (a heartbeat's delivery to the RM and
        # the RM's answer: one pass per heartbeat instead of three). Any other call made before
        # then puts it back in the queue first, where it keeps its place.
        self._next_fn: Callable[[Any], Any] | None = None
        self._next_item: Any = None

    def time(self) -> float:
        return self._now

    def call_soon(  # type: ignore[override]
        self, callback: Callable[..., Any], *args: Any, context: Ctx = None
    ) -> Any:
        if self._next_fn is not None:
            self._queue_next()
        ev = _event(0.0, None, callback, args, context)
        self._queue.append(ev)
        return ev

    def _queue_next(self) -> None:
        """The call waiting to run after this pass's last entry goes to the queue, as the batch
        of one it would have been."""
        batch = Batch((self._next_item,))
        batch.fn = self._next_fn  # type: ignore[assignment]
        batch.open = True
        self._next_fn = self._next_item = None
        self._queue.append(batch)

    def call_soon_batched(self, callback: Callable[[Any], Any], item: Any) -> None:
        """``call_soon(callback, item)``, sharing the queue entry of the call just before if it
        was to the same callback (the same object) in this pass: same order, one entry."""
        queue = self._queue
        if queue:
            last = queue[-1]
            if type(last) is Batch and last.fn is callback and last.open:
                last.append(item)
                return
        elif self._next_fn is None:
            # Nothing is ready: the next pass would run this first (``_run_next``).
            self._next_fn = callback
            self._next_item = item
            return
        else:
            self._queue_next()
            last = queue[-1]
            if last.fn is callback:
                last.append(item)
                return
        batch = Batch((item,))
        batch.fn = callback
        batch.open = True
        queue.append(batch)

    def call_at(  # type: ignore[override]
        self, when: float, callback: Callable[..., Any], *args: Any, context: Ctx = None
    ) -> Any:
        ev = _event(when, self, callback, args, context)
        heapq.heappush(self._heap, ev)
        return ev

    def call_later(  # type: ignore[override]
        self, delay: float, callback: Callable[..., Any], *args: Any, context: Ctx = None
    ) -> Any:
        ev = _event(self._now + delay, self, callback, args, context)
        heapq.heappush(self._heap, ev)
        return ev

    def call_after(self, delay: float, callback: Callable[..., Any], *args: Any) -> Event:
        """``call_later`` with a negative delay taken as 0 (the clock's timers: one call less per
        timer than clamping in the clock; ``now + 0.0`` is ``now``)."""
        now = self._now
        when = now + delay if delay > 0.0 else now
        ev = Event(when)  # (``_event``, without its call: every node timer comes here)
        ev.loop = self
        ev.fn = callback
        ev.args = args
        ev.ctx = None
        ev.gate = None
        heapq.heappush(self._heap, ev)
        return ev

    def call_gated(self, gate: ProcessGate, delay: float, callback: Callable[..., Any], *args: Any) -> Event:
        """``call_after(delay, gate.run, callback, *args)`` in one event: the loop asks the gate
        whether its process runs (no call through it when it does; held when it is paused). The
        same time, the same heap entry: the same order."""
        now = self._now
        when = now + delay if delay > 0.0 else now
        ev = Event(when)
        ev.loop = self
        ev.fn = callback
        ev.args = args
        ev.ctx = None
        ev.gate = gate
        heapq.heappush(self._heap, ev)
        return ev

    def _run_once(self) -> None:
        """asyncio's loop iteration, repeated here while no I/O is registered and nobody asked
        the loop to stop (what ``run_forever`` would do, without its call per iteration)."""
        heap, queue, state = self._heap, self._queue, vars(self)
        if self._next_fn is not None:  # made outside a pass (before the loop ran): queued
            self._queue_next()
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
                heap[:] = [e for e in heap if e.fn is not None]
                heapq.heapify(heap)
                self._cancelled_timers = 0
            else:
                while heap and heap[0].fn is None:
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
                ev = pop(heap)
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
            if self._next_fn is not None:
                self._run_next(heap, state, fds, res)
            if io or state["_stopping"] or not (queue or heap):
                return
            # (No ``bool()`` calls: two builtin calls a pass.)
            if queue and len(fds) <= 1 and (passes + 1) & signal_mask:
                ready = True
                passes += 1
            else:
                ready = False

    def _run_next(self, heap: list[Event], state: dict[str, Any], fds: dict[Any, Any], res: float) -> None:
        """The pass's last entry made a batched call while nothing was ready: run it now if the
        next pass would run it first and nothing before it (see ``_next_fn``), and so on for
        what that call makes; otherwise it goes to the queue."""
        queue = self._queue
        while (fn := self._next_fn) is not None:
            # The next pass would: stop (asked to, or I/O registered); sweep or pop cancelled
            # timers at its start (the heap's order after it pushes differs); queue a timer due
            # in this instant before running; or run what is queued already first.
            cancelled = self._cancelled_timers
            if (
                queue or state["_stopping"] or len(fds) > 1
                or (heap and heap[0] < self._now + res)
                or (cancelled and heap and (
                    (cancelled + cancelled > len(heap) and len(heap) > _SWEEP_MIN_TIMERS)
                    or heap[0].fn is None
                ))
            ):
                self._queue_next()
                return
            item = self._next_item
            self._next_fn = self._next_item = None
            try:
                fn(item)
            except (SystemExit, KeyboardInterrupt):
                raise
            except BaseException as exc:
                self.call_exception_handler({"message": f"Exception in callback {fn!r}", "exception": exc})


def new_event_loop(mode: ClockMode, core: VirtualCore = "des") -> asyncio.AbstractEventLoop:
    if mode == "virtual":
        return DesLoop() if core == "des" else AsyncioVirtualLoop()
    try:
        import uvloop
    except ImportError:  # pragma: no cover - uvloop is a declared dependency
        return asyncio.new_event_loop()
    return uvloop.new_event_loop()
