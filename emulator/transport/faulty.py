"""Message faults on any transport: seeded loss, duplication, reordering and delay of messages.

``FaultyLink`` wraps one end of a connection; the ``MessageFaultPlan`` says which faults are active
now and for which message types, so one plan drives every link of a run.
"""

from __future__ import annotations

import random
from typing import Any

import msgspec

from emulator.time.clock import Scheduler


class MessageFaultCounters(msgspec.Struct):
    dropped: int = 0
    duplicated: int = 0
    reordered: int = 0
    delayed: int = 0


class FaultWindow:
    __slots__ = ("delay_s", "direction", "duplicate", "end", "loss", "reorder", "start", "types")

    def __init__(
        self, start: float, end: float, loss: float, duplicate: float, reorder: float, delay_s: float,
        types: frozenset[str], direction: str,
    ) -> None:
        self.start, self.end = start, end
        self.loss, self.duplicate, self.reorder, self.delay_s = loss, duplicate, reorder, delay_s
        self.types = types
        self.direction = direction


class MessageFaultPlan:
    def __init__(self, clock: Scheduler, seed: int) -> None:
        self._clock = clock
        self._rng = random.Random(f"{seed}:messages")
        self.windows: list[FaultWindow] = []
        self.counters = MessageFaultCounters()

    def active(self, msg: Any, direction: str) -> FaultWindow | None:
        now = self._clock.now()
        for w in self.windows:
            if (
                w.start <= now < w.end
                and w.direction in (direction, "both")
                and (not w.types or type(msg).__name__ in w.types)
            ):
                return w
        return None

    def roll(self, p: float) -> bool:
        return p > 0 and self._rng.random() < p

    def delay(self, w: FaultWindow) -> float:
        return self._rng.uniform(0, w.delay_s)

    def wrap(self, link: Any, direction: str) -> Any:
        return FaultyLink(link, self, direction, self._clock) if self.windows else link


class FaultyLink:
    __slots__ = ("_clock", "_direction", "_held", "_inner", "_plan")

    def __init__(self, inner: Any, plan: MessageFaultPlan, direction: str, clock: Scheduler) -> None:
        self._inner = inner
        self._plan = plan
        self._direction = direction
        self._clock = clock
        self._held: Any = None

    @property
    def closed(self) -> bool:
        return bool(self._inner.closed)

    @property
    def authenticated(self) -> bool | None:
        """What the wrapped link's transport proved of its peer (None: it has no wire)."""
        return getattr(self._inner, "authenticated", None)

    def close(self) -> None:
        self._inner.close()

    def send(self, msg: Any) -> None:
        plan = self._plan
        w = plan.active(msg, self._direction)
        if w is None:
            self._pass(msg)
            return
        counters = plan.counters
        if plan.roll(w.loss):
            counters.dropped += 1
            return
        copies = 2 if plan.roll(w.duplicate) else 1
        counters.duplicated += copies - 1
        for _ in range(copies):
            if self._held is None and plan.roll(w.reorder):
                counters.reordered += 1
                self._held = msg  # goes out right after the next message on this link
                self._clock.call_later(1.0, self._flush)
            elif w.delay_s > 0:
                counters.delayed += 1
                self._clock.call_later(plan.delay(w), self._inner.send, msg)
            else:
                self._pass(msg)

    def _pass(self, msg: Any) -> None:
        self._inner.send(msg)
        self._flush()

    def _flush(self) -> None:
        held, self._held = self._held, None
        if held is not None:
            self._inner.send(held)
