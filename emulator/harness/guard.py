"""A run fails as a whole: an exception raised in any callback of the run (a timer, a message
delivery, a transport callback) stops it and is raised from the run, instead of being logged by
the event loop while the run goes on with a broken component. And a run stops cleanly on SIGINT
or SIGTERM: the guard turns them into an early end, so partial results can be written. A journal
write that fails ends the run early the same way, its error kept in ``failure``: the figures up to
then are still worth writing, marked partial. Another thread ends it the same way through a
``StopRequest`` (the Python API's cancellation)."""

from __future__ import annotations

import asyncio
import contextlib
import signal
import threading
from collections.abc import Awaitable, Callable
from types import TracebackType
from typing import Any, TypeVar

from rm import JournalWriteFailed

T = TypeVar("T")


class StopRequest:
    """Ends a run early from any thread, as a signal would: before the run starts (it then stops
    at once) or while it runs (its loop is woken up). One request per run."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._requested = False
        self._target: tuple[asyncio.AbstractEventLoop, Callable[[], None]] | None = None

    @property
    def requested(self) -> bool:
        return self._requested

    def request(self) -> None:
        with self._lock:
            self._requested = True
            target = self._target
        if target is not None:
            loop, stop = target
            with contextlib.suppress(RuntimeError):  # its loop has closed: the run is over already
                loop.call_soon_threadsafe(stop)

    def attach(self, loop: asyncio.AbstractEventLoop, stop: Callable[[], None]) -> bool:
        """``stop`` is to be called on ``loop`` from now on; True if a request came already."""
        with self._lock:
            self._target = (loop, stop)
            return self._requested

    def detach(self) -> None:
        with self._lock:
            self._target = None


class RunGuard:
    def __init__(
        self, loop: asyncio.AbstractEventLoop, stop_on_signals: bool = True,
        request: StopRequest | None = None,
    ) -> None:
        """``request``: another thread's way to end the run early."""
        self._loop = loop
        self._request = request
        self._failed: asyncio.Future[None] = loop.create_future()
        self._stopped: asyncio.Future[int] = loop.create_future()
        self._previous: Any = None
        self._signals: list[int] = []
        self._stop_on_signals = stop_on_signals
        self.signal: int | None = None  # the signal that stopped the run
        self.failure: JournalWriteFailed | None = None  # the error that stopped the run

    def __enter__(self) -> RunGuard:
        self._previous = self._loop.get_exception_handler()
        self._loop.set_exception_handler(self._handle)
        if self._stop_on_signals:
            for sig in (signal.SIGINT, signal.SIGTERM):
                try:
                    self._loop.add_signal_handler(sig, self._stop, sig)
                except (RuntimeError, ValueError, NotImplementedError):
                    continue  # not the main thread (a notebook, a test's worker thread)
                self._signals.append(sig)
        if self._request is not None and self._request.attach(self._loop, self.stop):
            self.stop()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._loop.set_exception_handler(self._previous)
        if self._request is not None:
            self._request.detach()
        for sig in self._signals:
            self._loop.remove_signal_handler(sig)
        for fut in (self._failed, self._stopped):
            if not fut.done():
                fut.cancel()

    def _stop(self, sig: int) -> None:
        if not self._stopped.done():
            self.signal = sig
            self._stopped.set_result(sig)

    def stop(self) -> None:
        """End the run early (as a signal would)."""
        self._stop(0)

    @property
    def stopped(self) -> bool:
        return self._stopped.done() and not self._stopped.cancelled()

    def _handle(self, loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        exc = context.get("exception")
        if isinstance(exc, JournalWriteFailed):
            # Said once (the RM logged it); later appends fail the same way until the run ends.
            if self.failure is None:
                self.failure = exc
            self._stop(0)
            return
        # Connection errors are the network's business (the transport closes that connection).
        if isinstance(exc, Exception) and not isinstance(exc, OSError) and not self._failed.done():
            self._failed.set_exception(exc)
            return
        loop.default_exception_handler(context)

    def fail(self, exc: BaseException) -> None:
        if not self._failed.done():
            self._failed.set_exception(exc)

    async def wait(self, aw: Awaitable[T]) -> T | None:
        """Await ``aw``; if the run fails first, raise its exception; if it is stopped first (a
        signal), return None."""
        task = asyncio.ensure_future(aw)
        waiting: list[asyncio.Future[Any]] = [task, self._failed, self._stopped]
        await asyncio.wait(waiting, return_when=asyncio.FIRST_COMPLETED)
        if self._failed.done() and not self._failed.cancelled():
            task.cancel()
            self._failed.result()
        if not task.done():
            task.cancel()
            return None
        return task.result()
