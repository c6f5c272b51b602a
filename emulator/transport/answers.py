"""The RM's answers that launch and kill nothing, written from saved pieces.

Most heartbeats are answered with an action and the next heartbeat id alone. Two such answers with
the same action differ only in ``heartbeat_id``, so the encoder keeps, per action, the last one's
encoding cut around its id and writes the saved pieces around the new id's encoding: one small
integer encoded instead of a whole struct. The bytes are msgspec's own (a test compares them).

The node host does the same for its nodes' full reports (``emulator.transport.client.ReportWire``):
a report still carries every status every interval (periodic mode models stock YARN), only its
bytes are reused while its statuses did not change.
"""

from __future__ import annotations

import msgspec

from rm.protocol import HeartbeatResponse

# msgspec writes a struct's field name as a msgpack string before its value.
_ID_KEY = msgspec.msgpack.encode("heartbeat_id")


def cut_around_id(body: bytes, number: bytes) -> tuple[bytes, bytes, int] | None:
    """``body`` (an answer or a report, encoded) without its heartbeat id (encoded as ``number``):
    the bytes before and after, and their length together."""
    at = body.find(_ID_KEY)
    if at < 0:
        return None
    cut = at + len(_ID_KEY)
    if body[cut : cut + len(number)] != number:
        return None
    return body[:cut], body[cut + len(number) :], len(body) - len(number)


class AnswerEncoder:
    """Appends the msgpack encoding of an answer with no launch and no kill to a buffer."""

    __slots__ = ("encode", "hits", "pieces")

    def __init__(self) -> None:
        self.encode = msgspec.msgpack.Encoder().encode
        # By action: the bytes before and after the id, and their length (``FrameEncoder.append``
        # writes a frame from them itself, without a call here).
        self.pieces: dict[str, tuple[bytes, bytes, int]] = {}
        self.hits = 0  # answers written from saved pieces

    def append(self, buf: bytearray, msg: HeartbeatResponse) -> None:
        number = self.encode(msg.heartbeat_id)
        pieces = self.pieces.get(msg.action)
        if pieces is not None:
            self.hits += 1
            buf += pieces[0]
            buf += number
            buf += pieces[1]
            return
        body = self.encode(msg)
        buf += body
        pieces = cut_around_id(body, number)
        if pieces is not None:
            self.pieces[msg.action] = pieces
