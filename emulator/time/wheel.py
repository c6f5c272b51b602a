"""A timer wheel for a process hosting thousands of nodes in real time.

Each node arms a few timers per heartbeat interval (its tick, container completions, ring
checks). As event-loop timers every one of them costs a libuv timer, a heap push and a wake-up of
its own; tens of thousands of them per second were the node host's largest cost. ``WheelClock``
keeps them in slots of ``slot_wall_s`` of wall time instead: arming appends to the slot's list,
and one loop timer per occupied slot runs everything due in it, in the order it was armed. The
heartbeats a slot sends then leave in one socket write as well.

A timer may carry its process's gate (``gated``: held while an injected pause stalls the
process): a slot calls each due callback directly when its process runs (one check, no call
through the gate). The clock is read once per slot: code run by a slot sees the slot's time
(re-read every ``_REREAD`` timers, so a long slot does not hide how late its last timers ran).
``hold`` does the same for a batch of messages delivered together (the answers of one socket read).

A timer never fires before its emulated time (as ``RealClock``'s): an entry goes into the first
slot that starts at or after its time, and a slot whose loop timer wakes early waits again. It
may fire up to one slot late; ``slot_wall_s`` bounds that lateness, which the run's lag probes
measure like any other.
"""

from __future__ import annotations

import asyncio
import heapq
import math
from collections.abc import Callable
from functools import partial
from typing import Any

import msgspec

from emulator.time.clock import RealClock
from emulator.time.desloop import ProcessGate as ProcessGate

# One millisecond of wall time: uvloop's own timer resolution, so nothing fires later than an
# event-loop timer could have.
DEFAULT_SLOT_WALL_S = 0.001
# A node host's slot: 2% of the heartbeat interval in wall time, within these bounds. A socket
# write costs tens of µs here (more on a virtualised network), so fewer, fuller slots are most
# of what hosting a node costs at low rates; 2% keeps ticks well inside the lag threshold (10%).
# Against 1%: half the slots, loop wake-ups and writes; ~0.89x worker CPU per node-interval at
# 4,000 nodes, tick lateness p99 up by under 1% of the interval.
SLOT_SHARE_OF_INTERVAL = 0.02
MAX_SLOT_WALL_S = 0.01
# uvloop counts whole milliseconds and may wake a slot up to one early: then wait at least one.
_MIN_WALL_S = 0.001
# Timers run between two clock readings within one slot (~1 ms of work at most).
_REREAD = 64


def wheel_slot_s(interval_wall_s: float) -> float:
    """The wall-time slot for nodes heartbeating every ``interval_wall_s`` wall seconds."""
    return min(MAX_SLOT_WALL_S, max(DEFAULT_SLOT_WALL_S, SLOT_SHARE_OF_INTERVAL * interval_wall_s))


class GatedTimer(msgspec.Struct):
    """One armed callback and the gate of the process it runs in (None: no process); ``cancel``
    clears it (the slot skips it). A struct: made in C, a few thousand times a second."""

    fn: Callable[..., Any] | None
    args: tuple[Any, ...]
    gate: ProcessGate | None

    def cancel(self) -> None:
        self.fn = None
        self.args = ()


class WheelClock:
    """The ``Scheduler`` / ``Clock`` port over a ``RealClock``: timers in wall-time slots, gated,
    with the clock read once per slot."""

    def __init__(self, clock: RealClock, slot_wall_s: float = DEFAULT_SLOT_WALL_S) -> None:
        if slot_wall_s <= 0:
            raise ValueError("slot_wall_s must be > 0")
        self._clock = clock
        self._loop: asyncio.AbstractEventLoop = clock.loop
        self._read_clock: Callable[[], float] = clock.now
        self.speed = clock.speed
        # Emulated seconds per slot: slot k covers emulated times ((k-1)·res, k·res].
        self._res = slot_wall_s * clock.speed
        self._slots: dict[int, list[GatedTimer]] = {}
        self._due: list[int] = []  # occupied slot numbers (a heap)
        self._armed_slot = -1  # the slot the loop timer is armed for
        self._handle: asyncio.TimerHandle | None = None
        self._running = False
        self._last_run = -1  # the last slot number the running pass covers
        self._held_t = 0.0  # the time code sees while a slot or a batch runs
        self._holding = False

    def now(self) -> float:
        return self._held_t if self._holding else self._read_clock()

    def hold(self) -> None:
        """Read the clock once for what runs until ``release`` (a batch of deliveries)."""
        if not self._holding:
            self._held_t = self._read_clock()
            self._holding = True

    def release(self) -> None:
        if not self._running:
            self._holding = False

    def call_later(self, delay: float, callback: Callable[..., Any], *args: Any) -> GatedTimer:
        return self.call_gated(None, delay, callback, *args)

    def gated(self, gate: ProcessGate) -> Callable[..., GatedTimer]:
        """``call_later`` for code inside the process of ``gate``: its timers are held while the
        process is paused."""
        return partial(self.call_gated, gate)

    def call_gated(
        self, gate: ProcessGate | None, delay: float, callback: Callable[..., Any], *args: Any
    ) -> GatedTimer:
        """``gated(gate)(delay, callback, *args)`` in one call (no partial made per caller); no
        gate: ``call_later``."""
        timer = GatedTimer(callback, args, gate)
        when = (self._held_t if self._holding else self._read_clock()) + (delay if delay > 0.0 else 0.0)
        k = math.ceil(when / self._res)
        if k <= self._last_run:  # armed by a slot for "now": the next pass, never this one
            k = self._last_run + 1
        slot = self._slots.get(k)
        if slot is None:
            self._slots[k] = [timer]
            heapq.heappush(self._due, k)
            if self._armed_slot < 0 or k < self._armed_slot:
                self._arm(k)
        else:
            slot.append(timer)
        return timer

    def call_soon(self, callback: Callable[..., Any], *args: Any) -> asyncio.Handle:
        return self._loop.call_soon(callback, *args)

    def call_soon_batched(self, callback: Callable[[Any], Any], item: Any) -> None:
        self._loop.call_soon(callback, item)

    async def sleep(self, seconds: float) -> None:
        await self._clock.sleep(seconds)

    async def sleep_until(self, t: float) -> None:
        await self._clock.sleep_until(t)

    @property
    def pending(self) -> int:
        """Timers armed and not yet run (cancelled ones included until their slot comes)."""
        return sum(len(s) for s in self._slots.values())

    def _arm(self, k: int, floor_s: float = 0.0) -> None:
        if self._running:
            return  # the slot being run arms the next one when it is done
        if self._handle is not None:
            self._handle.cancel()
        self._armed_slot = k
        wait = (k * self._res - self._read_clock()) / self.speed
        self._handle = self._loop.call_later(wait if wait > floor_s else floor_s, self._run)

    def _run(self) -> None:
        self._handle = None
        self._armed_slot = -1
        due, slots = self._due, self._slots
        read = self._read_clock
        now = read()
        # Every slot that has ended by now (a slot's entries are due by its end).
        last = math.floor((now + 1e-9) / self._res)
        early = not due or due[0] > last
        self._running = True
        self._last_run = last
        self._held_t = now
        self._holding = True
        reread = _REREAD
        try:
            while due and due[0] <= last:
                for timer in slots.pop(heapq.heappop(due)):
                    fn = timer.fn
                    if fn is None:
                        continue
                    timer.fn = None  # fired: a late ``cancel`` is a no-op (the slot list goes)
                    gate = timer.gate
                    if gate is None or gate._held is None:
                        args = timer.args
                        if args:
                            fn(*args)
                        else:
                            fn()  # a tick: no arguments
                    else:
                        gate.run(fn, *timer.args)
                    reread -= 1
                    if not reread:
                        reread = _REREAD
                        self._held_t = read()
        finally:
            self._running = False
            self._holding = False
            self._last_run = -1
            if due:
                self._arm(due[0], _MIN_WALL_S if early else 0.0)
