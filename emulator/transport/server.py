"""The RM's side of the TCP transport: every node channel on a connection is presented to
``receive(link, msg)`` as its own ``TcpLink``; the RM answers with ``link.send``.

The server's edge is bounded: a connection on which no node has registered may send a handful
of frames besides registrations (``admission_frames``; a refused registration counts too) and
is then closed; what the RM queues from such peers is bounded and served after registered nodes
(``rm.queues.inbound``); a peer that does not read what the RM sends is disconnected once
``max_write_buffer_bytes`` wait for it; and what any peer can cause at will is logged under a
budget (``rm.queues.logbudget``).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

from emulator.time.clock import wall_time
from emulator.transport import auth
from emulator.transport.connection import (
    DEFAULT_ADMISSION_FRAMES,
    DEFAULT_HANDSHAKE_TIMEOUT_S,
    DEFAULT_MAX_CONNECTIONS,
    DEFAULT_MAX_WRITE_BUFFER_BYTES,
    UNADMITTED_DECODE_BATCH,
    FramedConnection,
    TcpLink,
    TransportStats,
)
from emulator.transport.framing import (
    DEFAULT_MAX_FRAME_BYTES,
)
from emulator.transport.reports import ReportStatuses
from rm import LogBudget, LogHistogram
from rm.protocol import Disconnected, Register, RegisterResponse, RMInbound


class _ServerLink(TcpLink):
    """A node's channel at the RM: a registration's answer may admit the connection."""

    __slots__ = ()

    _conn: _ServerConnection

    def send(self, msg: Any) -> None:
        if not self.closed:
            if type(msg) is RegisterResponse:
                self._conn.answer_registration(self.channel, msg)
            else:
                self._conn.send(self.channel, msg)


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
        # A periodic report's statuses, unchanged since its last, are not decoded again.
        super().__init__(RMInbound | auth.Proof, server.max_frame_bytes, server.log, server.stats,
                         server.noisy, server.max_write_buffer_bytes, ReportStatuses())
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

    def answer_registration(self, channel: int, msg: RegisterResponse) -> None:
        """The RM answers a registration on ``channel`` (its links send every ``RegisterResponse``
        through here; everything else goes to ``send`` directly)."""
        if not self.admitted:
            if msg.action == "normal":
                self.admitted = True
                self._server.unadmitted.pop(self, None)
                if self._handshake_timer is not None:
                    self._handshake_timer.cancel()
                    self._handshake_timer = None
            else:
                self.send(channel, msg)
                self._spend()  # a refused registration (no secret) costs the budget
                return
        self.send(channel, msg)

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

    def on_frames(self, frames: list[tuple[int, Any]]) -> None:
        if not self.admitted:
            super().on_frames(frames)
            return
        # Admitted (nothing to spend): a frame for a channel the RM knows goes straight to it.
        ends = self._ends
        receive = self._receive
        on_frame = self.on_frame
        for channel, msg in frames:
            if self.closed:
                return
            end = ends.get(channel)
            if end is None or msg is None or type(msg) is auth.Proof:
                on_frame(channel, msg)
            else:
                receive(end, msg)

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
            link = self.links[channel] = _ServerLink(self, channel)
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
