"""A log budget for events a remote peer can cause at will (bad frames, spoofed heartbeats,
refused registrations, connection churn): a flood must not grow the event log without bound.

Each event name may log ``burst`` lines per ``window_s``; the rest are only counted, and the
count goes out as one ``log.suppressed`` line (naming the event) when that event's window turns,
or at ``flush``. So a flood costs at most ``burst + 1`` lines per event name per window.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from rm.ports import Log

DEFAULT_BURST = 20
DEFAULT_WINDOW_S = 10.0


class _Window:
    __slots__ = ("logged", "start", "suppressed")

    def __init__(self, start: float) -> None:
        self.start = start
        self.logged = 0
        self.suppressed = 0


class LogBudget:
    def __init__(self, log: Log, now: Callable[[], float], burst: int = DEFAULT_BURST,
                 window_s: float = DEFAULT_WINDOW_S) -> None:
        """``now()``: seconds on any clock (the windows are measured on it)."""
        self._log = log
        self._now = now
        self.burst = burst
        self.window_s = window_s
        self._windows: dict[str, _Window] = {}
        self.suppressed_total = 0

    def info(self, event: str, **fields: Any) -> None:
        if self._admit(event):
            self._log.info(event, **fields)

    def warning(self, event: str, **fields: Any) -> None:
        if self._admit(event):
            self._log.warning(event, **fields)

    def _admit(self, event: str) -> bool:
        now = self._now()
        w = self._windows.get(event)
        if w is None or now - w.start >= self.window_s:
            if w is not None and w.suppressed:
                self._summary(event, w)
            w = self._windows[event] = _Window(now)
        if w.logged < self.burst:
            w.logged += 1
            return True
        w.suppressed += 1
        self.suppressed_total += 1
        return False

    def _summary(self, event: str, w: _Window) -> None:
        self._log.warning("log.suppressed", suppressed_event=event, lines=w.suppressed,
                          window_s=self.window_s, since=round(w.start, 6))

    def flush(self) -> None:
        """Report what is suppressed so far (at the end of a run)."""
        for event, w in self._windows.items():
            if w.suppressed:
                self._summary(event, w)
        self._windows.clear()
