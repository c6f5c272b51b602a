"""Node reports as the RM's decoder reads them: a status list the node sent last time is not
decoded again.

A periodic node sends every running container in every report, and between two changes the list
is the same bytes each interval. The decoder reads a heartbeat's statuses as raw bytes
(``WireHeartbeat``); when they are the bytes its channel sent last, the report gets the very tuple
decoded then. Equal bytes decode to equal statuses, so the RM sees the same report; and as in
memory, where a periodic node resends its report object until something changes, the resource
tracker recognises a report it walked already (``NodeRecord.quiet_report``) and skips the walk.
Statuses that differ are decoded and validated as before: invalid ones make the frame malformed.

What a connection keeps is bounded (``max_bytes``, as its write buffer is): a peer that opens
channel after channel with large reports cannot make the RM hold them all; past the bound,
reports are decoded whole, as without this.
"""

from __future__ import annotations

from typing import Any, Union, get_args

import msgspec

from rm.protocol import ContainerStatus, ContainerUsage, Heartbeat

# Status lists a connection keeps (bytes, plus an entry's own cost): a 50,000-node periodic worker
# with ~8 containers a node keeps ~12 MB.
MAX_BYTES = 32 << 20
ENTRY_BYTES = 128


class WireHeartbeat(msgspec.Struct, tag="Heartbeat", frozen=True, omit_defaults=True, gc=False):
    """``Heartbeat`` as encoded (the same tag, fields, order and defaults: a test compares them),
    its statuses left undecoded."""

    machine_id: int
    heartbeat_id: int
    healthy: bool
    statuses: msgspec.Raw
    full: bool
    usage: tuple[ContainerUsage, ...] = ()


class ReportError(Exception):
    """A report's statuses are not valid (the frame is malformed)."""


class ReportStatuses:
    """Per channel, the raw statuses of its last report and the tuple decoded from them."""

    __slots__ = ("_decode", "_last", "kept_bytes", "max_bytes", "reused")

    wire = WireHeartbeat

    def __init__(self, max_bytes: int = MAX_BYTES) -> None:
        self._decode = msgspec.msgpack.Decoder(tuple[ContainerStatus, ...]).decode
        self._last: dict[int, tuple[msgspec.Raw, tuple[ContainerStatus, ...]]] = {}
        self.max_bytes = max_bytes
        self.kept_bytes = 0  # of the status lists kept, each counted with ENTRY_BYTES
        self.reused = 0  # reports whose statuses were the channel's last

    @staticmethod
    def union(msg_type: Any) -> Any:
        """``msg_type`` (a union of message types) with ``Heartbeat`` read as ``WireHeartbeat``."""
        members = get_args(msg_type) or (msg_type,)
        if Heartbeat not in members:
            raise ValueError(f"{msg_type} has no Heartbeat to read")
        return Union[tuple(WireHeartbeat if m is Heartbeat else m for m in members)]  # noqa: UP007

    def heartbeat(self, channel: int, wire: WireHeartbeat) -> Heartbeat:
        """The report ``wire`` stands for; raises ``ReportError`` if its statuses are not valid."""
        raw = wire.statuses
        last = self._last.get(channel)
        if last is not None and last[0] == raw:
            self.reused += 1
            statuses = last[1]
        else:
            try:
                statuses = self._decode(raw)
            except (msgspec.DecodeError, msgspec.ValidationError) as err:
                reason = str(err)
            else:
                self._keep(channel, last, raw, statuses)
                return Heartbeat(wire.machine_id, wire.heartbeat_id, wire.healthy, statuses,
                                 wire.full, wire.usage)
            del raw, wire  # nothing of the read held by the error's frames
            raise ReportError(f"Heartbeat.statuses: {reason}")
        return Heartbeat(wire.machine_id, wire.heartbeat_id, wire.healthy, statuses, wire.full, wire.usage)

    def _keep(self, channel: int, last: tuple[msgspec.Raw, Any] | None, raw: msgspec.Raw,
              statuses: tuple[ContainerStatus, ...]) -> None:
        """``statuses``, read from ``raw``, are the channel's last (``last``: what it kept before)."""
        if last is not None:
            self.kept_bytes -= len(last[0]) + ENTRY_BYTES
        size = len(raw) + ENTRY_BYTES
        if self.kept_bytes + size <= self.max_bytes:
            # A copy: the raw bytes point into the read they came with.
            self._last[channel] = (msgspec.Raw(bytes(raw)), statuses)
            self.kept_bytes += size
        elif last is not None:
            del self._last[channel]

    def forget(self, channel: int) -> None:
        """The channel closed."""
        last = self._last.pop(channel, None)
        if last is not None:
            self.kept_bytes -= len(last[0]) + ENTRY_BYTES

    def clear(self) -> None:
        self._last.clear()
        self.kept_bytes = 0
