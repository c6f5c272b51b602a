"""A run fails as a whole: an exception raised in any callback of the run (a timer, a message
delivery, a transport callback) stops it and is raised from the run, instead of being logged by
the event loop while the run goes on with a broken component."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from types import TracebackType
from typing import Any, TypeVar

T = TypeVar("T")


class RunGuard:
    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._failed: asyncio.Future[None] = loop.create_future()
        self._previous: Any = None

    def __enter__(self) -> RunGuard:
        self._previous = self._loop.get_exception_handler()
        self._loop.set_exception_handler(self._handle)
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._loop.set_exception_handler(self._previous)
        if not self._failed.done():
            self._failed.cancel()

    def _handle(self, loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        exc = context.get("exception")
        # Connection errors are the network's business (the transport closes that connection).
        if isinstance(exc, Exception) and not isinstance(exc, OSError) and not self._failed.done():
            self._failed.set_exception(exc)
            return
        loop.default_exception_handler(context)

    def fail(self, exc: BaseException) -> None:
        if not self._failed.done():
            self._failed.set_exception(exc)

    async def wait(self, aw: Awaitable[T]) -> T:
        """Await ``aw``; if the run fails first, raise its exception."""
        task = asyncio.ensure_future(aw)
        waiting: list[asyncio.Future[Any]] = [task, self._failed]
        await asyncio.wait(waiting, return_when=asyncio.FIRST_COMPLETED)
        if self._failed.done() and not self._failed.cancelled():
            task.cancel()
            self._failed.result()
        return task.result()
