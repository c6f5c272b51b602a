"""One TCP connection carrying length-prefixed msgpack frames (``framing``) on numbered channels,
one ``TcpLink`` per channel: what the RM's server side (``server``) and a node host's client side
(``client``) share. Uses asyncio transports/protocols rather than streams: a frame costs one decode
and a callback, with no task switch, and everything sent in one loop iteration leaves in one
``write``. Semantics match the in-memory transport: FIFO per link, ``send`` never blocks or
re-enters, closing either end of a link closes both. A connection that sends a bad frame is
aborted; nobody else notices.
"""

from __future__ import annotations

import asyncio
import socket
from typing import Any

from emulator.transport.framing import (
    FrameDecoder,
    FrameEncoder,
    FrameError,
    FrameTooLarge,
)
from emulator.transport.reports import ReportStatuses

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

class TransportStats:
    """Totals over every connection of one side (one process). A plain class with slots, not a
    Struct: every frame sent or read updates it, and a slot's update costs half a Struct field's."""

    __slots__ = (
        "admission_closed", "auth_failures", "bad_frames", "bytes_in", "bytes_out", "connections",
        "evicted", "frames_in", "frames_out", "handshake_timeouts", "proofs_refused", "reconnects",
        "refused", "slow_readers",
    )
    # The order ``snapshot`` reports them in.
    FIELDS = (
        "connections", "frames_in", "bytes_in", "frames_out", "bytes_out", "bad_frames", "reconnects",
        "refused", "evicted", "handshake_timeouts", "admission_closed", "slow_readers", "auth_failures",
        "proofs_refused",
    )

    def __init__(self) -> None:
        self.connections = 0
        self.frames_in = 0
        self.bytes_in = 0
        self.frames_out = 0
        self.bytes_out = 0
        self.bad_frames = 0
        self.reconnects = 0
        # Server side: refused over the cap (every slot registered), evicted for a newcomer (not
        # registered, idlest), and closed for not registering in time.
        self.refused = 0
        self.evicted = 0
        self.handshake_timeouts = 0
        # Closed for sending more than the admission budget before registering; disconnected for
        # not reading what was sent to them.
        self.admission_closed = 0
        self.slow_readers = 0
        # Closed for a wrong (or unasked-for) proof of the secret.
        self.auth_failures = 0
        # Client side: connections the RM closed after our proof with no word back (a wrong secret).
        self.proofs_refused = 0

    def snapshot(self) -> dict[str, int]:
        return {name: getattr(self, name) for name in self.FIELDS}


class TcpLink:
    """One node's channel on a connection; implements ``rm.ports.Link``."""

    __slots__ = ("_conn", "channel", "closed")

    def __init__(self, conn: FramedConnection, channel: int) -> None:
        self._conn = conn
        self.channel = channel
        self.closed = False  # an attribute, not a property: read before every send

    @property
    def authenticated(self) -> bool:
        """The peer proved it holds the secret (``auth``); the RM's registration check asks."""
        return self._conn.authenticated

    def send(self, msg: Any) -> None:
        if not self.closed:
            self._conn.send(self.channel, msg)

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            self._conn.close_channel(self.channel)

    def lost(self) -> None:
        """The connection (or the peer's end of this channel) is gone."""
        self.closed = True


class FramedConnection(asyncio.Protocol):
    """One TCP connection carrying frames (``framing``) on numbered channels; subclasses say what
    a frame means (``on_frame``)."""

    # Deliver at most this many frames per loop pass, pausing reads until the rest are delivered
    # (None: all that arrived at once). A node host sets it so that a broadcast reaching tens of
    # thousands of its nodes does not hold their timers back for the whole burst.
    yield_every: int | None = None

    def __init__(self, inbound_type: Any, max_frame_bytes: int, log: Any, stats: TransportStats,
                 noisy: Any = None, max_write_buffer_bytes: int | None = None,
                 reports: ReportStatuses | None = None) -> None:
        """``noisy``: the log for what the peer can cause at will (default ``log``);
        ``max_write_buffer_bytes``: disconnect a peer that leaves this much unread (None: no limit);
        ``reports``: decode a node report's statuses only when they changed (the RM's side)."""
        self._decoder = FrameDecoder(inbound_type, max_frame_bytes, reports)
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
        on_frames = self.on_frames
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
            on_frames(frames)
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

    def on_frames(self, frames: list[tuple[int, Any]]) -> None:
        """The frames of one read (or one delivery batch), in order; stops if the connection
        closes meanwhile."""
        on_frame = self.on_frame
        for channel, msg in frames:
            if self.closed:
                return
            on_frame(channel, msg)

    @property
    def max_frame_bytes(self) -> int:
        """The largest frame body either end accepts."""
        return self._encoder.max_frame_bytes

    def send(self, channel: int, msg: Any) -> None:
        if self.closed:
            return
        try:
            size = self._encoder.append(self._out, channel, msg)
        except FrameTooLarge as err:
            # Our own message is too big for the peer: drop it rather than get disconnected.
            self._log.error("transport.frame_too_large", peer=self.peer, error=str(err), outgoing=True)
            return
        self._queued(size)

    def send_encoded(self, channel: int, msg: Any, head: bytes, middle: bytes, tail: bytes) -> None:
        """``send(channel, msg)`` for a message the caller already encoded, in three pieces (the
        same bytes ``send`` would write; ``FrameEncoder.append_encoded``)."""
        if self.closed:
            return
        try:
            size = self._encoder.append_encoded(self._out, channel, msg, head, middle, tail)
        except FrameTooLarge as err:
            self._log.error("transport.frame_too_large", peer=self.peer, error=str(err), outgoing=True)
            return
        self._queued(size)

    def _queued(self, size: int) -> None:
        """Count a frame appended to the output and see that it is written this loop pass."""
        stats = self.stats
        stats.frames_out += 1
        stats.bytes_out += size
        base = self._max_write_buffer
        if base is not None and len(self._out) > base and (
            len(self._out) > base + WRITE_BUFFER_PER_CHANNEL_BYTES * len(self.links)
        ):
            self._slow_reader()
            return
        if not self._flush_pending:  # the first frame of this loop pass: one write for them all
            self._flush_pending = True
            asyncio.get_running_loop().call_soon(self._flush)

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
