"""TCP transport: protocol messages as length-prefixed msgpack frames (``framing``) over asyncio.

Server side (the RM): every node channel on a connection is presented to ``receive(link, msg)`` as
its own ``TcpLink``; the RM answers with ``link.send``. Client side (a node-hosting process): one
connection carries the channels of all its NodeManagers; if the connection drops, the client
reconnects with exponential backoff and every node re-registers with its full state (resync).

Uses asyncio transports/protocols rather than streams: a frame costs one decode and a callback,
with no task switch, and everything sent in one loop iteration leaves in one ``write``. Semantics
match the in-memory transport: FIFO per link, ``send`` never blocks or re-enters, closing either
end of a link closes both. A connection that sends a bad frame is aborted; nobody else notices.

The server's edge is bounded: a connection on which no node has registered may send a handful
of frames besides registrations (``admission_frames``; a refused registration counts too) and
is then closed; what the RM queues from such peers is bounded and served after registered nodes
(``rm.admission``); a peer that does not read what the RM sends is disconnected once
``max_write_buffer_bytes`` wait for it; and what any peer can cause at will is logged under a
budget (``rm.logbudget``).
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

import msgspec

from emulator.time.clock import LoopClock, wall_time
from emulator.transport import auth
from emulator.transport.backoff import Backoff
from emulator.transport.framing import (
    DEFAULT_MAX_FRAME_BYTES,
    FrameDecoder,
    FrameEncoder,
    FrameError,
    FrameTooLarge,
)
from rm.histogram import LogHistogram
from rm.logbudget import LogBudget
from rm.protocol import Disconnected, NodeInbound, Register, RegisterResponse, RMInbound

# Defaults for the server's limits (``TcpServer``); a scenario sets them in ``[transport]``.
DEFAULT_HANDSHAKE_TIMEOUT_S = 10.0
DEFAULT_MAX_CONNECTIONS = 1024
# Frames other than registrations (plus refused registrations) a connection may send before a
# node registers on it: an honest worker sends only registrations until then.
DEFAULT_ADMISSION_FRAMES = 8
UNADMITTED_DECODE_BATCH = 64
# Frames a node host delivers to its nodes per loop pass (~15 µs each: a few ms between timers).
NODE_HOST_DELIVERY_BATCH = 256
# Bytes waiting for a peer that does not read before it is disconnected (~30 intervals of
# answers to a 20,000-node worker), plus an allowance per node on the connection: every node that
# registers is sent the whole ring, so a worker whose nodes all join at once is owed O(nodes x
# ring) bytes (6,000 nodes in 2 workers: ~55 MB each) and must not be cut off for it.
DEFAULT_MAX_WRITE_BUFFER_BYTES = 32 << 20
WRITE_BUFFER_PER_CHANNEL_BYTES = 64 << 10


class TransportStats(msgspec.Struct):
    """Totals over every connection of one side (one process)."""

    connections: int = 0
    frames_in: int = 0
    bytes_in: int = 0
    frames_out: int = 0
    bytes_out: int = 0
    bad_frames: int = 0
    reconnects: int = 0
    # Server side: refused over the cap (every slot registered), evicted for a newcomer (not
    # registered, idlest), and closed for not registering in time.
    refused: int = 0
    evicted: int = 0
    handshake_timeouts: int = 0
    # Closed for sending more than the admission budget before registering; disconnected for not
    # reading what was sent to them.
    admission_closed: int = 0
    slow_readers: int = 0
    # Closed for a wrong (or unasked-for) proof of the secret.
    auth_failures: int = 0

    def snapshot(self) -> dict[str, int]:
        counts: dict[str, int] = msgspec.structs.asdict(self)
        return counts


class TcpLink:
    """One node's channel on a connection; implements ``rm.ports.Link``."""

    __slots__ = ("_closed", "_conn", "channel")

    def __init__(self, conn: FramedConnection, channel: int) -> None:
        self._conn = conn
        self.channel = channel
        self._closed = False

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def authenticated(self) -> bool:
        """The peer proved it holds the secret (``auth``); the RM's registration check asks."""
        return self._conn.authenticated

    def send(self, msg: Any) -> None:
        if not self._closed:
            self._conn.send(self.channel, msg)

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self._conn.close_channel(self.channel)

    def lost(self) -> None:
        """The connection (or the peer's end of this channel) is gone."""
        self._closed = True


class FramedConnection(asyncio.Protocol):
    """One TCP connection carrying frames (``framing``) on numbered channels; subclasses say what
    a frame means (``on_frame``)."""

    # Deliver at most this many frames per loop pass, pausing reads until the rest are delivered
    # (None: all that arrived at once). A node host sets it so that a broadcast reaching tens of
    # thousands of its nodes does not hold their timers back for the whole burst.
    yield_every: int | None = None

    def __init__(self, inbound_type: Any, max_frame_bytes: int, log: Any, stats: TransportStats,
                 noisy: Any = None, max_write_buffer_bytes: int | None = None) -> None:
        """``noisy``: the log for what the peer can cause at will (default ``log``);
        ``max_write_buffer_bytes``: disconnect a peer that leaves this much unread (None: no limit)."""
        self._decoder = FrameDecoder(inbound_type, max_frame_bytes)
        self._encoder = FrameEncoder(max_frame_bytes)
        self._log = log
        self._noisy = noisy if noisy is not None else log
        self._max_write_buffer = max_write_buffer_bytes
        self.stats = stats
        self.links: dict[int, TcpLink] = {}
        self._transport: Any = None
        self._out = bytearray()
        self._flush_pending = False
        self._reading_paused = False
        self.peer = "?"
        self.closed = False
        self.authenticated = False
        self.lost: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    # ---- asyncio.Protocol ---------------------------------------------------------------

    def connection_made(self, transport: Any) -> None:
        # uvloop's transports implement asyncio.Transport without subclassing it.
        self._transport = transport
        peer = transport.get_extra_info("peername")
        self.peer = f"{peer[0]}:{peer[1]}" if peer else "?"
        sock = transport.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.stats.connections += 1

    def data_received(self, data: bytes) -> None:
        if self.closed:
            return
        self.stats.bytes_in += len(data)
        self._deliver(data)

    def _deliver(self, data: bytes) -> None:
        on_frame = self.on_frame
        while True:
            limit = self.decode_batch()
            try:
                frames = self._decode(data, limit)
            except FrameError as err:
                self.stats.bad_frames += 1
                too_large = isinstance(err, FrameTooLarge)
                event = "transport.frame_too_large" if too_large else "transport.bad_frame"
                self._noisy.warning(event, peer=self.peer, error=str(err))
                self.abort()
                return
            data = b""
            self.stats.frames_in += len(frames)
            for channel, msg in frames:
                if self.closed:
                    return
                on_frame(channel, msg)
            if self.closed:
                return
            if limit is None or len(frames) < limit:
                if self._reading_paused:
                    self._reading_paused = False
                    self._transport.resume_reading()
                return
            if self.yield_every is not None:  # maybe more buffered: let due timers run first
                if not self._reading_paused:
                    self._reading_paused = True
                    self._transport.pause_reading()
                asyncio.get_running_loop().call_soon(self._deliver_rest)
                return

    def _deliver_rest(self) -> None:
        if not self.closed:
            self._deliver(b"")

    def decode_batch(self) -> int | None:
        """Frames to decode before delivering them (None: all that arrived)."""
        return self.yield_every

    def _decode(self, data: bytes, limit: int | None = None) -> list[tuple[int, Any]]:
        return self._decoder.feed(data, limit)

    def eof_received(self) -> bool:
        return False  # close our side too

    def connection_lost(self, exc: Exception | None) -> None:
        truncated = self._decoder.buffered
        # Queued messages may keep this object alive a while: not the bytes it held.
        self._decoder.clear()
        self._out = bytearray()
        self.closed = True
        self.stats.connections -= 1
        for link in self.links.values():
            link.lost()
        self.links.clear()
        log = self._log if self.trusted else self._noisy
        if truncated or exc is not None:
            log.warning(
                "transport.disconnected", peer=self.peer, truncated_bytes=truncated,
                error=str(exc) if exc else None,
            )
        else:
            log.info("transport.disconnected", peer=self.peer)
        if not self.lost.done():
            self.lost.set_result(None)

    @property
    def trusted(self) -> bool:
        """The peer has proved itself (server side: a node registered on the connection)."""
        return True

    # ---- frames -------------------------------------------------------------------------

    def on_frame(self, channel: int, msg: Any) -> None:
        raise NotImplementedError

    def send(self, channel: int, msg: Any) -> None:
        if self.closed:
            return
        try:
            size = self._encoder.append(self._out, channel, msg)
        except FrameTooLarge as err:
            # Our own message is too big for the peer: drop it rather than get disconnected.
            self._log.error("transport.frame_too_large", peer=self.peer, error=str(err), outgoing=True)
            return
        self.stats.frames_out += 1
        self.stats.bytes_out += size
        limit = self._write_limit()
        if limit is not None and len(self._out) > limit:
            self._slow_reader()
            return
        self._schedule_flush()

    def _write_limit(self) -> int | None:
        base = self._max_write_buffer
        return None if base is None else base + WRITE_BUFFER_PER_CHANNEL_BYTES * len(self.links)

    def close_channel(self, channel: int) -> None:
        link = self.links.pop(channel, None)
        if link is not None:
            link.lost()
        if not self.closed:
            FrameEncoder.append_close(self._out, channel)
            self._schedule_flush()

    def _schedule_flush(self) -> None:
        if not self._flush_pending:
            self._flush_pending = True
            asyncio.get_running_loop().call_soon(self._flush)

    def _flush(self) -> None:
        self._flush_pending = False
        if self.closed or self._transport is None or not self._out:
            return
        # A fresh buffer each time: the transport may keep the old one until it is sent.
        data, self._out = self._out, bytearray()
        self._transport.write(data)
        limit = self._write_limit()
        if limit is not None and self._transport.get_write_buffer_size() > limit:
            self._slow_reader()

    def _slow_reader(self) -> None:
        """The peer leaves what we send unread: disconnect it rather than buffer without limit."""
        self.stats.slow_readers += 1
        pending = len(self._out) + (self._transport.get_write_buffer_size() if self._transport else 0)
        self._noisy.warning("transport.slow_reader", peer=self.peer, unsent_bytes=pending,
                            limit=self._write_limit())
        self._out = bytearray()
        self.abort()

    def _remote_close(self, channel: int) -> None:
        link = self.links.pop(channel, None)
        if link is not None:
            link.lost()

    def close_when_done(self) -> None:
        """Half-close: pending frames are sent, then an end-of-file; frames still arrive until the
        other side closes too."""
        if self._transport is not None and not self.closed:
            self._flush()
            if self._transport.can_write_eof():
                self._transport.write_eof()
            else:
                self._transport.close()

    def close(self) -> None:
        """Orderly close: pending frames are sent first."""
        if self._transport is not None and not self.closed:
            self._flush()
            self._transport.close()

    def abort(self) -> None:
        self.closed = True
        if self._transport is not None:
            self._transport.abort()


# ---- server side (the RM) --------------------------------------------------------------------


class _ServerConnection(FramedConnection):
    """A node connection on the RM side.

    Until the RM accepts a registration on it (sends ``RegisterResponse(action="normal")`` on one of
    its channels) the connection is *unadmitted*, and it is aborted if no registration succeeds
    within the handshake timeout: a peer that connects and says nothing (or keeps presenting bad
    credentials, or only talks nonsense the RM rejects) holds a connection slot for a bounded time.
    Messages before admission still reach the RM, which refuses what an unregistered link may not
    do (heartbeats for a machine id not registered on that link get ``resync``), but only
    ``admission_frames`` of them besides registrations and channel closes (a refused
    registration counts as one): the next closes the connection. Registrations themselves are
    free, as a worker's first frames are one per node it hosts.

    At the cap a newcomer takes the slot of the unadmitted connection idle longest (no bytes in),
    so floods and slowloris cannot lock honest nodes out; an admitted one is never evicted.
    """

    def __init__(self, server: TcpServer) -> None:
        super().__init__(RMInbound | auth.Proof, server.max_frame_bytes, server.log, server.stats,
                         server.noisy, server.max_write_buffer_bytes)
        self._server = server
        self._challenge: auth.Challenge | None = None
        self._budget = server.admission_frames
        self._receive = server.receive
        # The RM's end of each channel (the link, or its wrapper), one object per channel.
        self._ends: dict[int, Any] = {}
        self.admitted = False
        self._handshake_timer: asyncio.TimerHandle | None = None

    def connection_made(self, transport: Any) -> None:
        super().connection_made(transport)
        server = self._server
        if len(server.connections) >= server.max_connections and server.unadmitted:
            victim = next(iter(server.unadmitted))  # the longest idle, not yet registered
            n = server.stats.evicted = server.stats.evicted + 1
            if n & (n - 1) == 0 or n % 1000 == 0:  # sparsely, as refusals
                self._log.warning("transport.evicted", peer=victim.peer, limit=server.max_connections,
                                  evicted_total=n)
            victim.abort()  # asyncio calls its connection_lost later; the slot is free now
            server.connections.discard(victim)
            del server.unadmitted[victim]
        if len(server.connections) >= server.max_connections:
            server.stats.refused += 1
            n = server.stats.refused
            # Logged with a running count, sparsely: a flood of refusals must not flood the log.
            if n & (n - 1) == 0 or n % 1000 == 0:
                self._log.warning("transport.refused", peer=self.peer, reason="too many connections",
                                  limit=server.max_connections, refused_total=n)
            self.abort()
            return
        server.connections.add(self)
        server.unadmitted[self] = None
        self._noisy.info("transport.connected", peer=self.peer)
        if server.secret:
            # Prove it, never send it: small frames, one at a time, until the proof checks out.
            self._challenge = auth.new_challenge()
            self._decoder.max_frame_bytes = min(auth.PRE_AUTH_MAX_FRAME_BYTES, server.max_frame_bytes)
            self.send(0, self._challenge)
        if server.handshake_timeout_s is not None:
            # Wall time on purpose: this protects the socket, whatever the emulated clock does.
            self._handshake_timer = asyncio.get_running_loop().call_later(
                server.handshake_timeout_s, self._handshake_expired
            )

    def data_received(self, data: bytes) -> None:
        if self in self._server.unadmitted:
            self._server.unadmitted.move_to_end(self)  # least recently active first: eviction order
        super().data_received(data)

    def connection_lost(self, exc: Exception | None) -> None:
        super().connection_lost(exc)
        self._server.connections.discard(self)
        self._server.unadmitted.pop(self, None)
        if self._handshake_timer is not None:
            self._handshake_timer.cancel()
        # Every node on this connection is gone as far as the RM can tell: say so, once each.
        ends, self._ends = self._ends, {}
        for end in ends.values():
            self._receive(end, Disconnected())

    def _handshake_expired(self) -> None:
        if self.admitted or self.closed:
            return
        server = self._server
        if server.handshake_hold and server.handshake_timeout_s is not None:
            # The RM does not answer yet (before its epoch): nobody could have registered.
            self._handshake_timer = asyncio.get_running_loop().call_later(
                server.handshake_timeout_s, self._handshake_expired
            )
            return
        self.stats.handshake_timeouts += 1
        self._noisy.warning("transport.handshake_timeout", peer=self.peer,
                          timeout_s=self._server.handshake_timeout_s, bytes_in=self._decoder.buffered)
        self.abort()

    @property
    def trusted(self) -> bool:
        return self.admitted

    def decode_batch(self) -> int | None:
        # Until a node registers, a few frames at a time: the budget may close the connection;
        # before a proof is due, one at a time (the frames after it may be bigger).
        if self.admitted:
            return None
        return 1 if self._challenge is not None and not self.authenticated else UNADMITTED_DECODE_BATCH

    def send(self, channel: int, msg: Any) -> None:
        if self.admitted or not isinstance(msg, RegisterResponse):
            super().send(channel, msg)
        elif msg.action == "normal":
            self.admitted = True
            self._server.unadmitted.pop(self, None)
            if self._handshake_timer is not None:
                self._handshake_timer.cancel()
                self._handshake_timer = None
            super().send(channel, msg)
        else:
            super().send(channel, msg)
            self._spend()  # a refused registration (no secret) costs the budget

    def _spend(self) -> bool:
        """One frame of the admission budget; False: it was spent already, the connection is closed
        (after what was sent to it) and nothing more it sent is delivered."""
        self._budget -= 1
        if self._budget >= 0 or self.closed:
            return not self.closed
        self.stats.admission_closed += 1
        self._noisy.warning("transport.admission_closed", peer=self.peer,
                            limit=self._server.admission_frames)
        self.close()
        self.closed = True
        return False

    def _decode(self, data: bytes, limit: int | None = None) -> list[tuple[int, Any]]:
        decode_cost = self._server.decode_cost
        if decode_cost is None:
            return self._decoder.feed(data, limit)
        t0 = wall_time()
        frames = self._decoder.feed(data, limit)
        if frames:
            decode_cost.add_many((wall_time() - t0) / len(frames), len(frames))
        return frames

    def on_frame(self, channel: int, msg: Any) -> None:
        if type(msg) is auth.Proof:
            self._proved(msg)
            return
        # Registrations and channel closes are free: a worker sends one per node it hosts.
        if not self.admitted and msg is not None and not isinstance(msg, Register) and not self._spend():
            return
        if msg is None:
            self._remote_close(channel)
            end = self._ends.pop(channel, None)
            if end is not None:
                self._receive(end, Disconnected())
            return
        end = self._ends.get(channel)
        if end is None:
            link = self.links[channel] = TcpLink(self, channel)
            wrap = self._server.wrap
            end = self._ends[channel] = link if wrap is None else wrap(link)
        self._receive(end, msg)

    def _proved(self, proof: auth.Proof) -> None:
        """A proof: unasked for or wrong, the connection is closed; right, its links are
        authenticated (registrations on them pass the RM's secret check)."""
        challenge = self._challenge
        if challenge is None or self.authenticated:
            reason = "unexpected proof"
        elif auth.verify(self._server.secret, challenge, auth.RM, proof):
            self.authenticated = True
            self._decoder.max_frame_bytes = self._server.max_frame_bytes
            return
        else:
            reason = "bad proof"
        self.stats.auth_failures += 1
        self._noisy.warning("transport.auth_failed", peer=self.peer, reason=reason)
        self.abort()


class TcpServer:
    """Accepts node connections and hands every message to ``receive(link, msg)`` (the RM)."""

    def __init__(
        self,
        receive: Callable[[Any, Any], None],
        log: Any,
        max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES,
        handshake_timeout_s: float | None = DEFAULT_HANDSHAKE_TIMEOUT_S,
        max_connections: int = DEFAULT_MAX_CONNECTIONS,
        wrap: Callable[[TcpLink], Any] | None = None,
        admission_frames: int = DEFAULT_ADMISSION_FRAMES,
        max_write_buffer_bytes: int = DEFAULT_MAX_WRITE_BUFFER_BYTES,
        secret: str = "",
    ) -> None:
        """``wrap(link)`` may decorate the RM's end of each node channel (message faults);
        ``secret``: challenge every connection to prove it (``auth``; empty: no challenge)."""
        self.receive = receive
        self.secret = secret
        self.wrap = wrap
        self.log = log
        # Events any peer can cause at will (connections, bad frames, ...) are logged on a budget.
        self.noisy = LogBudget(log, wall_time)
        self.admission_frames = admission_frames
        self.max_write_buffer_bytes = max_write_buffer_bytes
        self.max_frame_bytes = max_frame_bytes
        # None: no timeout (unit tests that speak the protocol by hand).
        self.handshake_timeout_s = handshake_timeout_s
        self.max_connections = max_connections
        # While True, handshake timeouts are postponed (the RM is not serving registrations yet).
        self.handshake_hold = False
        self.stats = TransportStats()
        self.connections: set[_ServerConnection] = set()
        # Connections no node has registered on yet, least recently active first (eviction order).
        self.unadmitted: OrderedDict[_ServerConnection, None] = OrderedDict()
        # Wall seconds spent decoding each frame, when measuring the RM's costs.
        self.decode_cost: LogHistogram | None = None
        self._server: asyncio.Server | None = None
        self.address: tuple[str, int] = ("", 0)

    async def start(self, host: str = "127.0.0.1", port: int = 0) -> tuple[str, int]:
        loop = asyncio.get_running_loop()
        self._server = await loop.create_server(lambda: _ServerConnection(self), host, port)
        sockname = self._server.sockets[0].getsockname()
        self.address = (sockname[0], sockname[1])
        self.log.info("transport.listening", host=self.address[0], port=self.address[1])
        return self.address

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
        conns = list(self.connections)
        for conn in conns:
            conn.close()
        if conns:
            # Let them say goodbye (``connection_lost`` logs) while the caller's log is still open.
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(1):
                    await asyncio.gather(*(c.lost for c in conns))
        self.noisy.flush()
        if self._server is not None:
            async with asyncio.timeout(5):
                await self._server.wait_closed()


# ---- client side (node-hosting processes) ----------------------------------------------------


class _ClientConnection(FramedConnection):
    yield_every = NODE_HOST_DELIVERY_BATCH

    def __init__(self, client: TcpClient) -> None:
        super().__init__(NodeInbound | auth.Challenge, client.max_frame_bytes, client.log, client.stats)
        self._nodes: dict[int, Any] = {}
        self._next_channel = 1
        self.challenged: asyncio.Future[bytes] = asyncio.get_running_loop().create_future()

    def open(self, node: Any) -> TcpLink:
        channel = self._next_channel
        self._next_channel += 1
        link = self.links[channel] = TcpLink(self, channel)
        self._nodes[channel] = node
        return link

    def on_frame(self, channel: int, msg: Any) -> None:
        if msg is None:
            self._remote_close(channel)
            self._nodes.pop(channel, None)
            return
        if type(msg) is auth.Challenge:
            if not self.challenged.done():
                self.challenged.set_result(msg.nonce)
            return
        node = self._nodes.get(channel)
        if node is not None and channel in self.links:
            node.receive(msg)

    def close_channel(self, channel: int) -> None:
        super().close_channel(channel)
        self._nodes.pop(channel, None)

    def send(self, channel: int, msg: Any) -> None:
        if type(msg) is Register and msg.credentials:
            # The secret is proved (``TcpClient.secret``), never sent, whatever the node says.
            msg = msgspec.structs.replace(msg, credentials="")
        super().send(channel, msg)


class TcpClient:
    """Connects a set of NodeManagers to the RM over one connection, reconnecting when it drops.

    ``connect(node)`` registers a node; while connected it gets a live link, after a reconnect a
    new one and a ``resync()`` call (it re-registers with its full state).
    """

    def __init__(
        self,
        host: str,
        port: int,
        clock: LoopClock,
        log: Any,
        max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES,
        backoff: Backoff | None = None,
        wrap: Callable[[TcpLink], Any] | None = None,
        secret: str = "",
        challenge_timeout_s: float = 10.0,
    ) -> None:
        """``wrap(link)`` may decorate each node's link before the node gets it (message faults);
        ``secret``: proved to the RM when it challenges a new connection (nodes register only
        after that); if it does not within ``challenge_timeout_s`` (an RM with no secret), the
        nodes register unproved."""
        self.secret = secret
        self.challenge_timeout_s = challenge_timeout_s
        self.host = host
        self.port = port
        self.clock = clock
        self.log = log
        self.max_frame_bytes = max_frame_bytes
        self.backoff = backoff or Backoff()
        self._wrap = wrap
        self.stats = TransportStats()
        self._nodes: list[Any] = []
        self._conn: _ClientConnection | None = None
        self._connected = asyncio.Event()

    def connect(self, node: Any) -> TcpLink | None:
        self._nodes.append(node)
        if self._conn is not None and not self._conn.closed:
            link = self._conn.open(node)
            node.attach(self._wrapped(link))
            return link
        return None

    def _wrapped(self, link: TcpLink) -> Any:
        return link if self._wrap is None else self._wrap(link)

    async def wait_connected(self) -> None:
        await self._connected.wait()

    async def run(self) -> None:
        """Keep the connection up until cancelled."""
        loop = asyncio.get_running_loop()
        first = True
        try:
            while True:
                try:
                    async with asyncio.timeout(10):
                        _, conn = await loop.create_connection(
                            lambda: _ClientConnection(self), self.host, self.port
                        )
                except (OSError, TimeoutError) as err:
                    delay = self.backoff.next_delay()
                    self.log.warning("transport.connect_failed", host=self.host, port=self.port,
                                     error=str(err), retry_in_s=round(delay, 3))
                    await self.clock.sleep(delay)
                    continue
                assert isinstance(conn, _ClientConnection)
                if self.secret:
                    try:
                        await self._prove(conn)
                    except BaseException:  # cancelled while waiting: the connection goes too
                        conn.close()
                        raise
                    if conn.closed:
                        continue  # lost before the proof: the next try, after the backoff
                self._conn = conn
                self.backoff.reset()
                for node in self._nodes:
                    node.attach(self._wrapped(conn.open(node)))
                    if not first:
                        node.resync()
                if not first:
                    self.stats.reconnects += 1
                    self.log.info("transport.reconnected", host=self.host, port=self.port,
                                  nodes=len(self._nodes))
                first = False
                self._connected.set()
                await conn.lost
                self._connected.clear()
                delay = self.backoff.next_delay()
                self.log.warning("transport.reconnecting", host=self.host, port=self.port,
                                 retry_in_s=round(delay, 3))
                await self.clock.sleep(delay)
        finally:
            if self._conn is not None:
                self._conn.close()

    async def _prove(self, conn: _ClientConnection) -> None:
        waits: list[asyncio.Future[Any]] = [conn.challenged, conn.lost]
        await asyncio.wait(waits, timeout=self.challenge_timeout_s, return_when=asyncio.FIRST_COMPLETED)
        if conn.challenged.done():
            conn.send(0, auth.prove(self.secret, conn.challenged.result(), auth.RM))
        elif not conn.closed:
            self.log.warning("transport.no_challenge", host=self.host, port=self.port,
                             waited_s=self.challenge_timeout_s)
        else:
            await self.clock.sleep(self.backoff.next_delay())

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
