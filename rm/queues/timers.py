"""A repeating timer on the injected clock (the RM's periodic checks)."""

from __future__ import annotations

from collections.abc import Callable

from rm.ports import Clock, Timer


class Periodic:
    """Calls ``fn()`` every ``period_s`` from ``start()`` until ``cancel()``."""

    def __init__(self, clock: Clock, period_s: float, fn: Callable[[], object]) -> None:
        self._clock = clock
        self._period = period_s
        self._fn = fn
        self._timer: Timer | None = None

    def start(self) -> None:
        if self._timer is None:
            self._timer = self._clock.call_later(self._period, self._fire)

    def _fire(self) -> None:
        self._fn()
        self._timer = self._clock.call_later(self._period, self._fire)

    def cancel(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
