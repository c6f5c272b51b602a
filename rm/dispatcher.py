"""One queue, one worker: the RM's event dispatcher (YARN's AsyncDispatcher).

Every item may carry an emulated service time (from the service-time model); the worker is busy
for that long before it handles the item, so waiting times and queue depth behave like those of a
saturated single-threaded RM, deterministically in virtual time.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable
from typing import Any, NamedTuple

from rm.histogram import LogHistogram
from rm.ports import Clock

Handler = Callable[[Any], float | None]


class DispatcherStatistics(NamedTuple):
    depth: int
    depth_max: int
    processed: int
    busy_s: float
    wait_mean_s: float
    wait_p99_s: float
    wait_max_s: float


class Dispatcher:
    def __init__(
        self,
        clock: Clock,
        handler: Callable[[Any], float | None],
        cost_s: Callable[[Any], float] | None = None,
        inline: bool = False,
    ) -> None:
        """``inline``: handle items as they are submitted (a trampoline, same FIFO order) instead of
        in a worker task. Only for items with no service time, where a worker never queues in
        virtual time anyway; it saves two task switches per item."""
        if inline and cost_s is not None:
            raise ValueError("an inline dispatcher cannot charge service time")
        self._inline = inline
        self._draining = False
        self._clock = clock
        self._handler = handler
        self._cost_s = cost_s
        self._queue: deque[tuple[float, Any]] = deque()
        self._wakeup: asyncio.Future[None] | None = None
        self.depth_max = 0
        self.processed = 0
        self.busy_s = 0.0
        self.waits = LogHistogram()
        self._stalled_until = 0.0
        # Fault injection (RM overload): every service-time cost is multiplied by this.
        self.cost_scale = 1.0
        # Bumped by ``clear``: an item taken before it is dropped, not handled.
        self._generation = 0

    def submit(self, item: Any) -> None:
        q = self._queue
        q.append((self._clock.now(), item))
        if len(q) > self.depth_max:
            self.depth_max = len(q)
        if self._inline:
            if not self._draining:
                self._drain()
            return
        w = self._wakeup
        if w is not None and not w.done():
            w.set_result(None)

    def _drain(self) -> None:
        q = self._queue
        self._draining = True
        try:
            while q:
                _, item = q.popleft()
                self.waits.add(0.0)
                self._handler(item)
                self.processed += 1
        finally:
            self._draining = False

    def instrument(self, wrap: Callable[[Handler], Handler]) -> None:
        """Replace the handler by ``wrap(handler)``, e.g. to time every item (cost accounting)."""
        self._handler = wrap(self._handler)
    def stall(self, seconds: float) -> None:
        """Handle nothing for ``seconds`` (fault injection: an RM pause). Queued dispatchers only."""
        if self._inline:
            raise RuntimeError("an inline dispatcher cannot stall; run the RM with queueing")
        self._stalled_until = max(self._stalled_until, self._clock.now() + seconds)

    def clear(self) -> None:
        """Drop everything queued, and the item being served (the process died)."""
        self._queue.clear()
        self._generation += 1
        self._stalled_until = 0.0

    @property
    def depth(self) -> int:
        return len(self._queue)

    async def run(self) -> None:
        if self._inline:
            return
        q = self._queue
        clock = self._clock
        loop = asyncio.get_running_loop()
        while True:
            if not q:
                self._wakeup = loop.create_future()
                await self._wakeup
                continue
            if clock.now() < self._stalled_until:
                # A stalled process handles nothing; what arrives meanwhile queues.
                await clock.sleep_until(self._stalled_until)
                continue
            t_enq, item = q.popleft()
            self.waits.add(clock.now() - t_enq)
            if self._cost_s is not None:
                cost = self._cost_s(item) * self.cost_scale
                if cost > 0:
                    self.busy_s += cost
                    generation = self._generation
                    await clock.sleep(cost)
                    if generation != self._generation:
                        continue
            # Work whose size is known only after handling (allocations) is charged afterwards.
            extra = self._handler(item)
            self.processed += 1
            if extra:
                self.busy_s += extra
                await clock.sleep(extra)

    def statistics(self) -> DispatcherStatistics:
        return DispatcherStatistics(
            depth=len(self._queue),
            depth_max=self.depth_max,
            processed=self.processed,
            busy_s=self.busy_s,
            wait_mean_s=self.waits.mean(),
            wait_p99_s=self.waits.quantile(0.99),
            wait_max_s=self.waits.max,
        )
