"""One queue, one server: the RM's event dispatcher (YARN's AsyncDispatcher), driven by timers.

Every item may carry an emulated service time (from the service-time model): the server is busy
for that long before it handles the item, so waiting times and queue depth behave like those of
a saturated single-threaded RM, deterministically in virtual time. An item with no cost that
finds the server free is handled at once (a trampoline keeps FIFO order when a handler submits
more). ``stall`` stops the server for a while: the process is paused, what arrives queues.

Items come in two classes: ``submit`` (served first) and ``submit_low``, a class with a bound on
its total weight that gets one turn in ``LOW_EVERY`` + 1 while the first is busy (so an honest
node re-registering under overload waits, but is not starved); what does not fit is dropped, not
queued (``rm.queues.inbound`` decides who goes where).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from typing import Generic, TypeVar

import msgspec

from rm.ports import Clock, Timer
from rm.queues.histogram import LogHistogram

T = TypeVar("T")
A = TypeVar("A")
B = TypeVar("B")
# Handles one item; may return extra service time known only afterwards (e.g. allocations made).
Handler = Callable[[T], float | None]
# The low class's share of service while both classes wait: one item in LOW_EVERY + 1.
LOW_EVERY = 8


class DispatcherStatistics(msgspec.Struct, frozen=True):
    depth: int
    depth_max: int
    processed: int
    busy_s: float
    wait_mean_s: float
    wait_p99_s: float
    wait_max_s: float
    dropped: int = 0


class Dispatcher(Generic[T]):
    def __init__(
        self, clock: Clock, handler: Handler[T], cost_s: Callable[[T], float] | None = None
    ) -> None:
        self._clock = clock
        self._handler = handler
        self._wraps: list[Callable[[Handler[T]], Handler[T]]] = []  # ``instrument``'s, in order
        self._cost_s = cost_s
        self._queue: deque[tuple[float, T]] = deque()
        self._low: deque[tuple[float, T, int]] = deque()
        self._low_weight = 0
        self._since_low = 0  # first-class items served since the low class last had a turn
        # Total weight the low class may hold (None: unbounded); what arrives past it is dropped.
        self.low_limit: int | None = None
        self.dropped = 0
        self._timer: Timer | None = None  # the server is busy (serving, or stalled) until it fires
        self._draining = False
        self.depth_max = 0
        self.processed = 0
        self.busy_s = 0.0
        self._waits = LogHistogram()
        self._served_at_once = 0  # items that waited 0 s (folded into the waits when read)
        self._stalled_until = 0.0
        # Fault injection (RM overload): every service-time cost is multiplied by this.
        self.cost_scale = 1.0
        # Told of a first-class item about to wait (False: drop it instead), and of every item
        # that waited as it is handled; an item served at once is never told (it never waited).
        self.on_wait: Callable[[T], bool] | None = None
        self.on_handled: Callable[[T], None] | None = None

    def submit(self, item: T) -> None:
        q = self._queue
        if (
            not q and self._timer is None and not self._draining and not self._low
            and self._cost_s is None
            and (not self._stalled_until or self._clock.now() >= self._stalled_until)
        ):
            # The server is free and items cost nothing to start: serve this one at once, as
            # ``_drain`` would, without the queue's bookkeeping (every heartbeat comes this way).
            if not self.depth_max:
                self.depth_max = 1
            self._served_at_once += 1
            self._draining = True
            try:
                # ``_handle(item)``, inlined: one call less per heartbeat and per node update.
                extra = self._handler(item)
                self.processed += 1
                if extra:
                    self.busy_s += extra
                    self._timer = self._clock.call_later(extra, self._resume)
            finally:
                self._draining = False
            if (q or self._low) and self._timer is None:
                self._drain()  # what the handler queued meanwhile
            return
        on_wait = self.on_wait
        if on_wait is not None and not on_wait(item):
            return
        q.append((self._clock.now(), item))
        depth = len(q) + len(self._low)
        if depth > self.depth_max:
            self.depth_max = depth
        if self._timer is None and not self._draining:
            self._drain()

    def serve_now(self, fn: Callable[[A, B], None], a: A, b: B) -> bool:
        """Serve ``fn(a, b)`` as ``submit`` would serve an item whose handling it is, if the server
        is free and items cost nothing to start (the caller vouches that the handler, unwrapped,
        would do just that with the item and add no service time); False: the caller submits the
        item. No item is made: an idle RM's heartbeat goes to the tracker straight from here."""
        if (
            self._queue or self._timer is not None or self._draining or self._low
            or self._cost_s is not None
            or (self._stalled_until and self._clock.now() < self._stalled_until)
        ):
            return False
        # ``submit``'s served-at-once bookkeeping, the same.
        if not self.depth_max:
            self.depth_max = 1
        self._served_at_once += 1
        self._draining = True
        try:
            fn(a, b)
            self.processed += 1
        finally:
            self._draining = False
        if (self._queue or self._low) and self._timer is None:
            self._drain()  # what ``fn`` queued meanwhile
        return True

    @property
    def handler(self) -> Handler[T]:
        """The handler items go to now (``instrument``'s wraps included)."""
        return self._handler

    def submit_low(self, item: T, weight: int = 1) -> bool:
        """Queue ``item`` in the low class if its weight fits under ``low_limit``; False: dropped."""
        limit = self.low_limit
        if limit is not None and self._low_weight + weight > limit:
            self.dropped += 1
            return False
        self._low.append((self._clock.now(), item, weight))
        self._low_weight += weight
        depth = len(self._queue) + len(self._low)
        if depth > self.depth_max:
            self.depth_max = depth
        if self._timer is None and not self._draining:
            self._drain()
        return True

    def _drain(self) -> None:
        q = self._queue
        low = self._low
        clock = self._clock
        self._draining = True
        try:
            while (q or low) and self._timer is None:
                now = clock.now()
                if now < self._stalled_until:
                    self._timer = clock.call_later(self._stalled_until - now, self._resume)
                    return
                if q and not (low and self._since_low >= LOW_EVERY):
                    t_enq, item = q.popleft()
                    self._since_low += 1
                else:
                    self._since_low = 0
                    t_enq, item, weight = low.popleft()
                    self._low_weight -= weight
                self._waits.add(now - t_enq)
                cost = self._cost_s(item) * self.cost_scale if self._cost_s is not None else 0.0
                if cost > 0:
                    self.busy_s += cost
                    self._timer = clock.call_later(cost, self._serve, item)
                    return
                self._handle(item)
        finally:
            self._draining = False

    def _serve(self, item: T) -> None:
        self._timer = None
        self._handle(item)
        if self._timer is None:
            self._drain()

    def _handle(self, item: T) -> None:
        on_handled = self.on_handled
        if on_handled is not None:
            on_handled(item)
        extra = self._handler(item)
        self.processed += 1
        if extra:
            # Work whose size is known only after handling (allocations) is charged afterwards.
            self.busy_s += extra
            self._timer = self._clock.call_later(extra, self._resume)

    def _resume(self) -> None:
        self._timer = None
        self._drain()

    def instrument(self, wrap: Callable[[Handler[T]], Handler[T]]) -> None:
        """Replace the handler by ``wrap(handler)``, e.g. to time every item (cost accounting)."""
        self._wraps.append(wrap)
        self._handler = wrap(self._handler)

    def rebind(self, handler: Handler[T]) -> None:
        """Handle items with ``handler`` from now on, wrapped as ``instrument`` wrapped the first
        (the owner's handler is replaced, e.g. by an RM's next life: bound to it once, not looked
        up per item)."""
        for wrap in self._wraps:
            handler = wrap(handler)
        self._handler = handler

    def stall(self, seconds: float) -> None:
        """Handle nothing for ``seconds`` (the process is paused); what arrives meanwhile queues."""
        now = self._clock.now()
        self._stalled_until = max(self._stalled_until, now + seconds)
        if self._timer is None:
            self._timer = self._clock.call_later(self._stalled_until - now, self._resume)

    def clear(self) -> None:
        """Drop everything queued, and the item being served (the process died)."""
        self._queue.clear()
        self._low.clear()
        self._low_weight = 0
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._stalled_until = 0.0

    @property
    def depth(self) -> int:
        return len(self._queue) + len(self._low)

    def statistics(self) -> DispatcherStatistics:
        if self._served_at_once:
            self._waits.add_many(0.0, self._served_at_once)
            self._served_at_once = 0
        waits = self._waits
        return DispatcherStatistics(
            depth=len(self._queue) + len(self._low),
            depth_max=self.depth_max,
            processed=self.processed,
            busy_s=self.busy_s,
            wait_mean_s=waits.mean(),
            wait_p99_s=waits.quantile(0.99),
            wait_max_s=waits.max,
            dropped=self.dropped,
        )
