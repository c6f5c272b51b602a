"""The node<->node channel between node-hosting processes: ring liveness over TCP.

One ``TcpPeers`` per worker process implements ``ringmon.ports.PeerChannel`` for every node it
hosts. A message to a machine id bound in this process is handed over through the event loop, and
a liveness no fault touches is a timestamp written on the watcher (``touch``), as in memory; one
to a node elsewhere goes over the TCP connection to the process at the endpoint
the sender's ring names ("host:port", which each worker's nodes announce at registration). There
is one connection per pair of workers, opened on first use and multiplexed by destination machine
id (the frame's channel), with the framing of the RM connection (``framing``).

The accepting side challenges every connection (``auth``): the connecting side proves it holds
the run's secret (the secret itself never goes on the wire), then says which endpoint it is with
a ``PeerHello``. A connection that does not, in time (``handshake_timeout_s``), or that claims an
endpoint already connected to us, or sends a malformed frame, is closed, and only that
connection; incoming connections are capped (``gate``). If two workers connect to each other at
once, both send on the connection opened by the smaller endpoint and retire the other (they
finish it with an end-of-file after what was already sent on it, so nothing is lost). Delivery
is best effort, like liveness itself: what cannot be delivered (no connection, unknown
destination) is counted and dropped.
"""

from __future__ import annotations

import asyncio
from typing import Any, TypeVar

import msgspec

from emulator.time.clock import Scheduler
from emulator.transport import auth
from emulator.transport.framing import DEFAULT_MAX_FRAME_BYTES
from emulator.transport.gate import DEFAULT_MAX_CONNECTIONS, Gate, GuardedConnection
from emulator.transport.peers import PeerBindings
from emulator.transport.tcp import FramedConnection, TransportStats
from ringmon.protocol import Liveness, LivenessPing
from rm import Log

# Frames waiting for a connection to a peer process to open, at most this many per peer.
MAX_WAITING = 10_000


class PeerHello(msgspec.Struct, tag=True, frozen=True):
    """What the connecting side says after its proof: the endpoint it listens on (who it is)."""

    endpoint: str


PeerFrame = PeerHello | Liveness | LivenessPing


def split_endpoint(endpoint: str) -> tuple[str, int]:
    host, _, port = endpoint.rpartition(":")
    return host.strip("[]"), int(port)


class _Outgoing(FramedConnection):
    """A connection we opened to ``remote``: answer its challenge, say who we are, then talk."""

    def __init__(self, peers: TcpPeers, remote: str) -> None:
        super().__init__(auth.Challenge | Liveness | LivenessPing, peers.max_frame_bytes, peers.log,
                         peers.stats)
        self._peers = peers
        self.remote: str | None = remote
        self.initiator = peers.endpoint
        self.greeted = False
        self._timer: asyncio.TimerHandle | None = None

    def connection_made(self, transport: Any) -> None:
        super().connection_made(transport)
        self._timer = asyncio.get_running_loop().call_later(self._peers.handshake_timeout_s,
                                                            self._too_slow)

    def _too_slow(self) -> None:
        if not self.greeted and not self.closed:
            self._peers.counters.rejected += 1
            self._log.warning("peers.rejected", peer=self.peer, reason="no challenge in time")
            self.abort()

    def on_frame(self, channel: int, msg: Any) -> None:
        peers = self._peers
        if isinstance(msg, auth.Challenge):
            if self.greeted:
                self._log.warning("peers.rejected", peer=self.peer, reason="a second challenge")
                self.abort()
                return
            self.send(0, auth.prove(peers.credentials, msg.nonce, auth.PEER))
            self.send(0, PeerHello(endpoint=peers.endpoint))
            self.greeted = True
            if self._timer is not None:
                self._timer.cancel()
            peers.greeted(self)
        elif self.greeted:
            peers.arrived(self, channel, msg)
        else:
            self._log.warning("peers.rejected", peer=self.peer, reason="no challenge")
            self.abort()

    def finish(self) -> None:
        """Send nothing more: what is queued goes out, then an end-of-file (the other side
        delivers everything before it and closes)."""
        self.close_when_done()

    def connection_lost(self, exc: Exception | None) -> None:
        super().connection_lost(exc)
        if self._timer is not None:
            self._timer.cancel()
        self._peers.lost(self)


class _Incoming(GuardedConnection):
    """A connection another worker opened to our peer port: it proves the secret, then says
    which endpoint it is; an endpoint already connected to us cannot be claimed again."""

    def __init__(self, peers: TcpPeers) -> None:
        super().__init__(PeerFrame, peers.gate, peers.max_frame_bytes)
        self._peers = peers
        self.remote: str | None = None
        self.initiator = ""
        self.greeted = False

    def on_message(self, channel: int, msg: Any) -> None:
        if isinstance(msg, PeerHello):
            if self.greeted:
                self.refuse("a second hello")
                return
            why = self._peers.claim_refused(msg.endpoint)
            if why:
                self.refuse(why)
                return
            self.remote = self.initiator = msg.endpoint
            self.greeted = True
            self.identified()
            self._peers.greeted(self)
        elif self.greeted:
            self._peers.arrived(self, channel, msg)
        else:
            self.refuse("no hello")

    def refuse(self, reason: str) -> None:
        self._peers.counters.rejected += 1
        super().refuse(reason)

    def finish(self) -> None:
        self.close_when_done()

    def connection_lost(self, exc: Exception | None) -> None:
        super().connection_lost(exc)
        self._peers.lost(self)


_PeerConnection = _Outgoing | _Incoming
_C = TypeVar("_C", _Outgoing, _Incoming)


class TcpPeers(PeerBindings):
    def __init__(
        self,
        clock: Scheduler,
        log: Log,
        credentials: str = "",
        seed: int = 0,
        max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES,
        handshake_timeout_s: float = 10.0,
        max_connections: int = DEFAULT_MAX_CONNECTIONS,
    ) -> None:
        """``max_connections``: incoming connections served at once (one per other worker is
        enough; past it the idlest that has not said who it is makes room, ``gate``)."""
        super().__init__(seed)
        self._clock = clock
        self.log = log
        self.credentials = credentials
        self.max_frame_bytes = max_frame_bytes
        self.handshake_timeout_s = handshake_timeout_s
        self._conns: dict[str, _PeerConnection] = {}
        self._waiting: dict[str, list[tuple[int, Any]]] = {}
        self._all: set[_PeerConnection] = set()
        # The endpoint a sender's messages came from: where to answer it if our ring does not say.
        self._learned: dict[int, str] = {}
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self.endpoint = ""
        self.stats = TransportStats()
        self.gate = Gate("peers", log, credentials, auth.PEER, self.stats, max_connections,
                         handshake_timeout_s)

    # ---- lifecycle ---------------------------------------------------------------------------

    async def start(self, host: str = "127.0.0.1", port: int = 0) -> str:
        """Listen for peer connections; returns this process's endpoint ("host:port")."""
        loop = asyncio.get_running_loop()
        self._server = await loop.create_server(lambda: self._track(_Incoming(self)), host, port)
        bound = self._server.sockets[0].getsockname()
        shown = f"[{host}]" if ":" in host else host
        self.endpoint = f"{shown}:{bound[1]}"
        self.log.info("peers.listening", endpoint=self.endpoint)
        return self.endpoint

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
        for conn in list(self._all):
            conn.close()
        self.gate.noisy.flush()
        for task in list(self._tasks):
            task.cancel()
        if self._server is not None:
            async with asyncio.timeout(5):
                await self._server.wait_closed()

    def _track(self, conn: _C) -> _C:
        self._all.add(conn)
        return conn

    # ---- the PeerChannel -------------------------------------------------------------------------

    def touch(self, dst: int, sender: int, ring_version: int) -> bool:
        # Between nodes of this process, liveness no fault touches is a timestamp written on the
        # watcher, as in memory; a crashed watcher is unbound (the liveness goes nowhere), a
        # stalled in-loop one refuses it (it must wait as a message), and injected loss makes
        # every liveness a message that may be dropped. To another process it is a message.
        if self.loss > 0.0:
            return False
        receiver = self.receiver(dst)
        if receiver is None or not receiver.heard_from(sender, ring_version):
            return False
        self.counters.sent += 1
        return True

    def send(self, dst: int, msg: Any, endpoint: str = "") -> None:
        if not self._sent_and_kept():
            return
        c = self.counters
        if self.receiver(dst) is not None:
            self._clock.call_soon(self._hand_over, dst, msg)
            return
        where = endpoint or self._learned.get(dst, "")
        if not where or where == self.endpoint:
            c.undeliverable += 1  # a node of ours that is gone, or nobody knows where
            return
        conn = self._conns.get(where)
        if conn is not None and not conn.closed:
            conn.send(dst, msg)
            return
        waiting = self._waiting.get(where)
        if waiting is None:
            waiting = self._waiting[where] = []
            task = asyncio.ensure_future(self._connect(where))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
        if len(waiting) < MAX_WAITING:
            waiting.append((dst, msg))
        else:
            c.undeliverable += 1

    # ---- connections ----------------------------------------------------------------------------

    async def _connect(self, where: str) -> None:
        loop = asyncio.get_running_loop()
        try:
            host, port = split_endpoint(where)
            async with asyncio.timeout(self.handshake_timeout_s):
                await loop.create_connection(lambda: self._track(_Outgoing(self, where)), host, port)
        except (OSError, ValueError, TimeoutError) as err:
            dropped = self._waiting.pop(where, [])
            self.counters.undeliverable += len(dropped)
            self.log.warning("peers.connect_failed", endpoint=where, error=str(err), dropped=len(dropped))

    def claim_refused(self, endpoint: str) -> str:
        """Why an incoming connection may not be the one to ``endpoint`` (empty: it may). The
        connection a worker already has to us stays; a newcomer claiming its endpoint is refused
        (only our own connection to it may race with it: both connected at once, ``greeted``)."""
        if endpoint == self.endpoint:
            return "claims our own endpoint"
        existing = self._conns.get(endpoint)
        if existing is not None and not existing.closed and isinstance(existing, _Incoming):
            return "endpoint already connected"
        return ""

    def greeted(self, conn: _PeerConnection) -> None:
        """``conn``'s hello checked out: it carries traffic to and from ``conn.remote`` now."""
        remote = conn.remote
        assert remote is not None
        existing = self._conns.get(remote)
        if existing is not None and existing is not conn and not existing.closed:
            # Both sides connected at once: keep the connection opened by the smaller endpoint.
            keep = existing if existing.initiator == min(self.endpoint, remote) else conn
            retire = conn if keep is existing else existing
            self._conns[remote] = keep
            retire.finish()
            conn = keep
        else:
            self._conns[remote] = conn
        for dst, msg in self._waiting.pop(remote, []):
            conn.send(dst, msg)

    def arrived(self, conn: _PeerConnection, dst: int, msg: Any) -> None:
        if msg is None:  # a channel close: peers never send one, the frame is malformed here
            conn.stats.bad_frames += 1
            self.gate.noisy.warning("transport.bad_frame", peer=conn.peer, error="a channel close")
            conn.abort()
            return
        if conn.remote is not None:
            self._learned[msg.sender] = conn.remote
        self._hand_over(dst, msg)

    def lost(self, conn: _PeerConnection) -> None:
        self._all.discard(conn)
        if conn.remote is not None and self._conns.get(conn.remote) is conn:
            del self._conns[conn.remote]

    @property
    def connections(self) -> int:
        return len(self._conns)
