"""The status page's connections: a cap, and a deadline for the first byte.

aiohttp serves a connection that never sends a request for as long as the peer keeps it open
(its keep-alive timeout starts after a response), and serves any number of them: 500 silent
sockets hold 500 descriptors and handlers for the rest of a run. The gate wraps aiohttp's
protocol factory (``AppRunner.server``): past ``max_connections`` a newcomer is closed at once,
and a connection that has sent nothing within ``first_byte_s`` is closed. What aiohttp's
handler sees is unchanged: every transport callback is passed through.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

# Enough for many browser tabs (each holds a stream and a few fetches) and Prometheus.
MAX_CONNECTIONS = 128
# A browser or scraper sends its request at once; a silent socket is someone else's.
FIRST_BYTE_S = 10.0


class GateCounters:
    def __init__(self) -> None:
        self.open = 0
        self.refused = 0  # closed at once: the cap was full
        self.silent = 0  # closed for sending nothing in time


class ConnectionGate:
    """A protocol factory: aiohttp's, behind a cap and a first-byte deadline."""

    def __init__(
        self, factory: Callable[[], asyncio.Protocol], max_connections: int = MAX_CONNECTIONS,
        first_byte_s: float = FIRST_BYTE_S,
    ) -> None:
        self._factory = factory
        self.max_connections = max_connections
        self.first_byte_s = first_byte_s
        self.counters = GateCounters()

    def __call__(self) -> asyncio.Protocol:
        return _Gated(self._factory(), self)


class _Gated(asyncio.Protocol):
    def __init__(self, inner: asyncio.Protocol, gate: ConnectionGate) -> None:
        self._inner = inner
        self._gate = gate
        self._counted = False
        self._deadline: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        c = self._gate.counters
        if c.open >= self._gate.max_connections:
            c.refused += 1
            transport.close()  # never handed to aiohttp
            return
        c.open += 1
        self._counted = True
        loop = asyncio.get_running_loop()
        self._deadline = loop.call_later(self._gate.first_byte_s, self._silent, transport)
        self._inner.connection_made(transport)

    def _silent(self, transport: asyncio.BaseTransport) -> None:
        self._gate.counters.silent += 1
        transport.close()

    def data_received(self, data: bytes) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None
        self._inner.data_received(data)

    def eof_received(self) -> bool | None:
        return self._inner.eof_received()

    def connection_lost(self, exc: Exception | None) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None
        if self._counted:
            self._counted = False
            self._gate.counters.open -= 1
            self._inner.connection_lost(exc)

    def pause_writing(self) -> None:
        self._inner.pause_writing()

    def resume_writing(self) -> None:
        self._inner.resume_writing()

    def __getattr__(self, name: str) -> Any:
        # Anything else aiohttp's handler is asked for (it is its own protocol to the rest of it).
        return getattr(self._inner, name)
