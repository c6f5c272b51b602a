"""The harness's control channel to its node-hosting worker processes.

The RM side of a TCP run (``tcprun.TcpRM``) listens on a control endpoint; each worker connects,
answers the harness's challenge with a proof that it holds the run's secret (``transport.auth``:
the secret never goes on the wire), says hello (its id, the addresses it hosts, its peer
endpoint), and from then on takes commands: node faults to apply at an emulated time, liveness
loss, and requests for its nodes' real state (``NodeReality``) for the invariant checker. A
worker whose control connection drops without having been told to stop has died (``kill -9``):
the harness treats its nodes as crashed together. This is the harness's business, not the
emulated system's: the NodeManager protocol (``rm.protocol``) knows nothing of it.

The port has the limits of every authenticated port (``transport.gate``): a handshake timeout,
small frames before the proof, a connection cap. A worker id that has joined and is connected
cannot be claimed by a second connection: the newcomer is refused, the worker keeps its link.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
from collections.abc import Callable
from typing import Any, Literal

import msgspec

from emulator.harness.hosting import NodeReality
from emulator.transport import auth
from emulator.transport.framing import DEFAULT_MAX_FRAME_BYTES
from emulator.transport.gate import (
    DEFAULT_HANDSHAKE_TIMEOUT_S,
    DEFAULT_MAX_CONNECTIONS,
    Gate,
    GuardedConnection,
)
from emulator.transport.tcp import FramedConnection, TransportStats
from rm import Log


class WorkerHello(msgspec.Struct, tag=True, frozen=True):
    """A worker's first message after its proof."""

    worker: int
    pid: int
    nodes: list[str]
    peer_endpoint: str = ""


class NodeFault(msgspec.Struct, tag=True, frozen=True):
    """Do ``kind`` to these nodes at emulated time ``at_s`` (now if already past)."""

    kind: Literal["crash", "rejoin", "pause", "health"]
    addresses: list[str]
    at_s: float
    durations: list[float] = []
    healthy: bool = True


class LivenessLoss(msgspec.Struct, tag=True, frozen=True):
    fraction: float
    at_s: float


class Gather(msgspec.Struct, tag=True, frozen=True):
    request: int


class Realities(msgspec.Struct, tag=True, frozen=True):
    request: int
    nodes: list[NodeReality]


class Stop(msgspec.Struct, tag=True, frozen=True):
    """The run is over: stop the nodes and report."""


class Goodbye(msgspec.Struct, tag=True, frozen=True):
    """The worker stops on its own (its duration is over, or it was told to): not a death."""


ToWorker = NodeFault | LivenessLoss | Gather | Stop
FromWorker = WorkerHello | Realities | Goodbye


class WorkerLink:
    """The harness's end of one worker's control connection."""

    def __init__(self, conn: _ServerSide, hello: WorkerHello) -> None:
        self._conn = conn
        self.worker = hello.worker
        self.pid = hello.pid
        self.nodes = hello.nodes
        self.peer_endpoint = hello.peer_endpoint
        self.stopping = False

    @property
    def alive(self) -> bool:
        return not self._conn.closed

    def send(self, msg: ToWorker) -> None:
        self._conn.send(0, msg)


class _ServerSide(GuardedConnection):
    def __init__(self, server: ControlServer) -> None:
        super().__init__(FromWorker, server.gate, server.max_frame_bytes)
        self._server = server
        self.link: WorkerLink | None = None

    def on_message(self, channel: int, msg: Any) -> None:
        server = self._server
        match msg:
            case WorkerHello() if self.link is None:
                known = server.workers.get(msg.worker)
                if known is not None and known.alive:
                    self.refuse("worker id already joined")
                    return
                self.identified()
                self.link = WorkerLink(self, msg)
                server.joined(self.link)
            case Realities() if self.link is not None:
                server.answered(self.link, msg)
            case Goodbye() if self.link is not None:
                self.link.stopping = True
            case _:
                self._log.warning("control.unexpected", peer=self.peer, type=type(msg).__name__)
                self.abort()

    def connection_lost(self, exc: Exception | None) -> None:
        super().connection_lost(exc)
        if self.link is not None:
            self._server.left(self.link)


class ControlServer:
    """Accepts worker connections; ``on_join(link)`` and ``on_death(link)`` tell the harness."""

    def __init__(
        self,
        log: Log,
        credentials: str,
        on_join: Callable[[WorkerLink], None],
        on_death: Callable[[WorkerLink], None],
        max_frame_bytes: int = 64 * DEFAULT_MAX_FRAME_BYTES,
        max_connections: int = DEFAULT_MAX_CONNECTIONS,
        handshake_timeout_s: float = DEFAULT_HANDSHAKE_TIMEOUT_S,
    ) -> None:
        """``max_frame_bytes``: after a worker's proof (its nodes' state is one frame)."""
        self.log = log
        self.max_frame_bytes = max_frame_bytes
        self.stats = TransportStats()
        self.gate = Gate("control", log, credentials, auth.CONTROL, self.stats, max_connections,
                         handshake_timeout_s)
        self._on_join = on_join
        self._on_death = on_death
        self.workers: dict[int, WorkerLink] = {}
        self._requests = itertools.count(1)
        self._pending: dict[int, tuple[asyncio.Future[list[NodeReality]], set[int], list[NodeReality]]] = {}
        self._server: asyncio.Server | None = None
        self.address: tuple[str, int] = ("", 0)

    async def start(self, host: str = "127.0.0.1", port: int = 0) -> tuple[str, int]:
        loop = asyncio.get_running_loop()
        self._server = await loop.create_server(lambda: _ServerSide(self), host, port)
        name = self._server.sockets[0].getsockname()
        self.address = (name[0], name[1])
        return self.address

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
            self.gate.noisy.flush()
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(5):
                    await self._server.wait_closed()

    def finished(self) -> None:
        """The run is over: workers that go now have not died."""
        for link in self.workers.values():
            link.stopping = True

    def joined(self, link: WorkerLink) -> None:
        self.workers[link.worker] = link
        self.log.info("worker.joined", worker=link.worker, pid=link.pid, nodes=len(link.nodes))
        self._on_join(link)

    def left(self, link: WorkerLink) -> None:
        for fut, waiting, _ in self._pending.values():
            waiting.discard(link.worker)
            if not waiting and not fut.done():
                fut.set_result([])
        if not link.stopping:
            self.log.warning("worker.lost", worker=link.worker, pid=link.pid, nodes=len(link.nodes))
            self._on_death(link)

    def broadcast(self, msg: ToWorker) -> None:
        for link in self.workers.values():
            if link.alive:
                link.send(msg)

    def stop_all(self) -> None:
        for link in self.workers.values():
            link.stopping = True
            if link.alive:
                link.send(Stop())

    async def gather(self, timeout_s: float = 10.0) -> list[NodeReality]:
        """Every live worker's nodes' real state now (an empty list for workers that died)."""
        live = [w for w in self.workers.values() if w.alive]
        if not live:
            return []
        request = next(self._requests)
        fut: asyncio.Future[list[NodeReality]] = asyncio.get_running_loop().create_future()
        collected: list[NodeReality] = []
        self._pending[request] = (fut, {w.worker for w in live}, collected)
        for w in live:
            w.send(Gather(request))
        try:
            async with asyncio.timeout(timeout_s):
                await fut
        finally:
            del self._pending[request]
        return collected

    def answered(self, link: WorkerLink, msg: Realities) -> None:
        entry = self._pending.get(msg.request)
        if entry is None:
            return
        fut, waiting, collected = entry
        collected.extend(msg.nodes)
        waiting.discard(link.worker)
        if not waiting and not fut.done():
            fut.set_result(collected)


class _ClientSide(FramedConnection):
    def __init__(self, client: ControlClient) -> None:
        super().__init__(ToWorker | auth.Challenge, client.max_frame_bytes, client.log, client.stats)
        self._client = client
        self.challenged: asyncio.Future[bytes] = asyncio.get_running_loop().create_future()

    def on_frame(self, channel: int, msg: Any) -> None:
        if isinstance(msg, auth.Challenge):
            if self.challenged.done():
                self._log.warning("control.unexpected", peer=self.peer, type="Challenge")
                self.abort()
            else:
                self.challenged.set_result(msg.nonce)
        elif self.challenged.done():
            self._client.handle(msg)
        else:
            self._log.warning("control.unexpected", peer=self.peer, type=type(msg).__name__)
            self.abort()


class ControlClient:
    """A worker's end: says hello, then hands every command to ``handle``."""

    def __init__(
        self, log: Log, handle: Callable[[ToWorker], None],
        max_frame_bytes: int = 64 * DEFAULT_MAX_FRAME_BYTES,
    ) -> None:
        self.log = log
        self.handle = handle
        self.max_frame_bytes = max_frame_bytes
        self.stats = TransportStats()
        self._conn: _ClientSide | None = None

    async def connect(self, host: str, port: int, hello: WorkerHello, secret: str,
                      timeout_s: float = 10.0) -> None:
        """Connect, prove ``secret`` (it is not sent) and say ``hello``, within ``timeout_s``."""
        loop = asyncio.get_running_loop()
        async with asyncio.timeout(timeout_s):
            _, conn = await loop.create_connection(lambda: _ClientSide(self), host, port)
            assert isinstance(conn, _ClientSide)
            self._conn = conn
            waits: list[asyncio.Future[Any]] = [conn.challenged, conn.lost]
            await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
        if not conn.challenged.done():
            raise ConnectionError("the harness closed the control connection before challenging it")
        nonce = conn.challenged.result()
        conn.send(0, auth.prove(secret, nonce, auth.CONTROL))
        conn.send(0, hello)

    def send(self, msg: FromWorker) -> None:
        if self._conn is not None:
            self._conn.send(0, msg)

    @property
    def lost(self) -> asyncio.Future[None] | None:
        return self._conn.lost if self._conn is not None else None

    def close(self) -> None:
        """Say goodbye (a worker that stops on purpose has not died) and close."""
        if self._conn is not None:
            self._conn.send(0, Goodbye())
            self._conn.close()
