"""Sans-IO framing of protocol messages for byte streams (the TCP transport).

A frame is an 8-byte header — payload length and channel id, both unsigned 32-bit big-endian —
followed by the msgpack encoding of one protocol struct (``rm.protocol``). One connection carries
the channels of many NodeManagers (one per node), so a worker process hosting 20,000 nodes needs
one socket, not 20,000. A frame with an empty payload closes its channel (no struct encodes to
zero bytes).

Broadcasts cost one encoding per connection, not per node: a message that is the very object sent
last on this connection goes as a header alone with the REPEAT flag (the RM sends each ring delta to
every node), and a ``RegisterResponse`` whose ring is the ring the previous one carried on this
connection goes without it, flagged SAME_RING (in a registration storm every answer carries the
RM's whole ring: N registrations would otherwise send N rings). The flags are the channel word's
top two bits; the receiver restores what they stand for, so both ends see whole messages.

The decoder never trusts the peer: a length above ``max_frame_bytes`` is refused as soon as the
header arrives (before buffering the payload), and a payload that is not valid msgpack or not one
of the expected message types raises ``FrameError``; the caller closes that connection only.
"""

from __future__ import annotations

import struct
from typing import Any

import msgspec

from emulator.transport.answers import AnswerEncoder
from emulator.transport.reports import ReportError, ReportStatuses
from rm.protocol import HeartbeatResponse, RegisterResponse

HEADER = struct.Struct("!II")
HEADER_SIZE = HEADER.size
REPEAT = 1 << 31
SAME_RING = 1 << 30
MAX_CHANNEL = SAME_RING - 1
DEFAULT_MAX_FRAME_BYTES = 1 << 20
_PLACEHOLDER = bytes(HEADER_SIZE)

# (channel, message); ``None`` means the peer closed the channel.
Frame = tuple[int, Any]


class FrameError(Exception):
    """The peer sent something that is not a valid frame; the connection must be closed."""


class FrameTooLarge(FrameError):
    pass


class MalformedFrame(FrameError):
    pass


class FrameEncoder:
    """Appends frames to a caller-owned buffer (so many frames go out in one write). One encoder
    per connection: it remembers what it sent last (REPEAT, SAME_RING)."""

    __slots__ = ("_answer", "_encode_id", "_encode_into", "_last", "_last_ring", "_pieces", "answers",
                 "max_frame_bytes")

    def __init__(self, max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES) -> None:
        self._encode_into = msgspec.msgpack.Encoder().encode_into
        self.max_frame_bytes = max_frame_bytes
        self._last: Any = None
        self._last_ring: Any = None
        self.answers = AnswerEncoder()
        self._answer = self.answers.append
        self._pieces = self.answers.pieces
        self._encode_id = self.answers.encode

    def append(self, buf: bytearray, channel: int, msg: Any) -> int:
        """Append one frame carrying ``msg``; returns the frame's size in bytes."""
        if channel > MAX_CHANNEL:
            raise ValueError(f"channel {channel} above {MAX_CHANNEL}")
        if msg is self._last:
            buf += HEADER.pack(0, channel | REPEAT)
            return HEADER_SIZE
        kind = type(msg)
        if kind is HeartbeatResponse and not msg.launch and not msg.kill:
            # Most of what the RM sends: the answer written from saved pieces, header first.
            pieces = self._pieces.get(msg.action)
            if pieces is not None:
                number = self._encode_id(msg.heartbeat_id)
                size = pieces[2] + len(number)
                if size <= self.max_frame_bytes:
                    buf += HEADER.pack(size, channel)
                    buf += pieces[0]
                    buf += number
                    buf += pieces[1]
                    self.answers.hits += 1
                    self._last = msg
                    return size + HEADER_SIZE
        start = len(buf)
        buf += _PLACEHOLDER
        flags = 0
        ring = None
        if kind is HeartbeatResponse and not msg.launch and not msg.kill:
            self._answer(buf, msg)  # the first of its action (or one too large: refused below)
        elif kind is RegisterResponse and msg.ring is not None:
            ring = msg.ring
            if ring is self._last_ring:
                flags = SAME_RING
                self._encode_into(msgspec.structs.replace(msg, ring=None), buf, start + HEADER_SIZE)
            else:
                self._encode_into(msg, buf, start + HEADER_SIZE)
        else:
            self._encode_into(msg, buf, start + HEADER_SIZE)
        size = len(buf) - start - HEADER_SIZE
        if size > self.max_frame_bytes:
            del buf[start:]
            raise FrameTooLarge(
                f"{kind.__name__} encodes to {size} bytes, above the {self.max_frame_bytes} byte limit"
            )
        HEADER.pack_into(buf, start, size, channel | flags)
        self._last = msg
        if ring is not None:
            self._last_ring = ring
        return size + HEADER_SIZE

    def append_encoded(self, buf: bytearray, channel: int, msg: Any, head: bytes, middle: bytes,
                       tail: bytes) -> int:
        """Append one frame carrying ``msg`` whose body the caller already encoded, in three pieces
        (the same bytes ``append`` would write: a node host's saved full report around its new
        heartbeat id); a REPEAT stands for ``msg`` next. Returns the frame's size in bytes."""
        size = len(head) + len(middle) + len(tail)
        if size > self.max_frame_bytes:
            raise FrameTooLarge(
                f"{type(msg).__name__} encodes to {size} bytes, above the {self.max_frame_bytes} byte limit"
            )
        buf += HEADER.pack(size, channel)
        buf += head
        buf += middle
        buf += tail
        self._last = msg
        return size + HEADER_SIZE

    @staticmethod
    def append_close(buf: bytearray, channel: int) -> int:
        buf += HEADER.pack(0, channel)
        return HEADER_SIZE

    def encode(self, channel: int, msg: Any) -> bytes:
        buf = bytearray()
        self.append(buf, channel, msg)
        return bytes(buf)


class _NoWire:
    """Matches no decoded message (a decoder without ``reports``)."""


class FrameDecoder:
    """Feed it bytes as they arrive; it returns the complete frames, in order."""

    __slots__ = ("_buf", "_decode", "_last", "_last_ring", "_wire", "frames", "max_frame_bytes", "reports")

    def __init__(self, msg_type: Any, max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES,
                 reports: ReportStatuses | None = None) -> None:
        """``reports``: heartbeats' statuses are decoded only when they differ from their
        channel's last (the RM's side; ``emulator.transport.reports``)."""
        self.reports = reports
        self._wire: type = _NoWire
        if reports is not None:
            msg_type = reports.union(msg_type)
            self._wire = reports.wire
        self._decode = msgspec.msgpack.Decoder(msg_type).decode
        self._buf = bytearray()
        self.max_frame_bytes = max_frame_bytes
        self.frames = 0
        self._last: Any = None  # the last message decoded (REPEAT stands for it)
        self._last_ring: Any = None  # the ring of the last RegisterResponse that carried one

    @property
    def buffered(self) -> int:
        """Bytes of an incomplete frame held back (non-zero at EOF means a truncated frame)."""
        return len(self._buf)

    def clear(self) -> None:
        """Drop what is buffered (the connection is gone)."""
        self._buf = bytearray()
        if self.reports is not None:
            self.reports.clear()

    def feed(self, data: bytes | bytearray | memoryview, limit: int | None = None) -> list[Frame]:
        """``limit``: decode at most this many frames now, keeping the rest of the bytes for the
        next call (so a peer about to be cut off does not get its whole burst decoded first)."""
        if self._buf:
            self._buf += data
            buf: bytes | bytearray = self._buf
        else:
            buf = data if isinstance(data, bytes) else bytes(data)
        out: list[Frame] = []
        append = out.append
        pos = 0
        end = len(buf)
        max_size = self.max_frame_bytes
        count = limit if limit is not None else -1
        decode = self._decode
        unpack = HEADER.unpack_from
        last = self._last
        wire = self._wire
        report: Any = self.reports.heartbeat if self.reports is not None else None
        try:
            with memoryview(buf) as view:
                while end - pos >= HEADER_SIZE and count != 0:
                    count -= 1
                    size, word = unpack(view, pos)
                    if size > max_size:
                        raise FrameTooLarge(f"frame of {size} bytes announced, limit is {max_size}")
                    stop = pos + HEADER_SIZE + size
                    if stop > end:
                        break
                    if size and word <= MAX_CHANNEL:  # a message, no flags: nearly every frame
                        try:
                            msg = decode(view[pos + HEADER_SIZE : stop])
                        except (msgspec.DecodeError, msgspec.ValidationError) as err:
                            raise MalformedFrame(f"channel {word}: {err}") from None
                        if type(msg) is wire:
                            try:
                                msg = report(word, msg)
                            except ReportError as err:
                                raise MalformedFrame(f"channel {word}: {err}") from None
                        elif type(msg) is RegisterResponse and msg.ring is not None:
                            self._last_ring = msg.ring
                        last = msg
                        append((word, msg))
                        pos = stop
                        continue
                    channel = word & MAX_CHANNEL
                    if size == 0:
                        if not word & REPEAT:
                            append((channel, None))
                            if self.reports is not None:
                                self.reports.forget(channel)
                        elif last is None or word & SAME_RING:
                            raise MalformedFrame(f"channel {channel}: a repeat with nothing to repeat")
                        else:
                            append((channel, last))
                    else:
                        try:
                            msg = decode(view[pos + HEADER_SIZE : stop])
                        except (msgspec.DecodeError, msgspec.ValidationError) as err:
                            raise MalformedFrame(f"channel {channel}: {err}") from None
                        if type(msg) is RegisterResponse:
                            if word & SAME_RING:
                                if self._last_ring is None or msg.ring is not None:
                                    raise MalformedFrame(f"channel {channel}: no ring to refer to")
                                msg = msgspec.structs.replace(msg, ring=self._last_ring)
                            elif msg.ring is not None:
                                self._last_ring = msg.ring
                        else:
                            kind = "Heartbeat" if type(msg) is wire else type(msg).__name__
                            raise MalformedFrame(f"channel {channel}: flags on a {kind}")
                        last = msg
                        append((channel, msg))
                    pos = stop
        finally:
            self._last = last  # the last message decoded (REPEAT stands for it)
        self.frames += len(out)
        if buf is self._buf:
            del self._buf[:pos]
        elif pos < end:
            self._buf += buf[pos:]
        return out
