"""A link wrapper counting the messages and wire bytes (msgpack, as the TCP transport would
send them) that go through it; the emulator's measure of load on the RM.

A periodic heartbeat is counted arithmetically: a node resends the same tuple of statuses until
something changes, so its encoded size is remembered (per link, by identity) and only the few
fields that change are sized. Every other message is encoded to be measured."""

from __future__ import annotations

from typing import Any

import msgspec

from emulator.transport.memory import MemoryLink
from rm import Link
from rm.protocol import Heartbeat


def msgpack_int_size(v: int) -> int:
    """Bytes of ``v`` as msgpack encodes it (the smallest form)."""
    if v >= 0:
        if v < 0x80:
            return 1
        return 2 if v < 0x100 else 3 if v < 0x10000 else 5 if v < 0x100000000 else 9
    if v >= -32:
        return 1
    return 2 if v >= -0x80 else 3 if v >= -0x8000 else 5 if v >= -0x80000000 else 9


class Meter:
    __slots__ = ("_heartbeat_base", "bytes", "encoder", "messages")

    def __init__(self) -> None:
        self.messages = 0
        self.bytes = 0
        self.encoder = msgspec.msgpack.Encoder()
        # A heartbeat without usage reports, less its statuses and its two integers.
        self._heartbeat_base = -1

    def heartbeat_base(self, hb: Heartbeat, statuses_size: int) -> int:
        if self._heartbeat_base < 0:
            self._heartbeat_base = (len(self.encoder.encode(hb)) - statuses_size
                                    - msgpack_int_size(hb.machine_id) - msgpack_int_size(hb.heartbeat_id))
        return self._heartbeat_base


class MeteredLink:
    __slots__ = ("_id_size", "_inner", "_machine_id", "_meter", "_post", "_statuses", "_statuses_size")

    def __init__(self, inner: Link, meter: Meter) -> None:
        self._inner = inner
        # An in-memory link without latency posts a report itself (``send_report`` saw it open).
        self._post = inner.poster() if isinstance(inner, MemoryLink) else None
        self._meter = meter
        self._statuses: tuple[Any, ...] | None = None
        self._statuses_size = 0
        # The machine id heartbeats on this link carry, and its size (one node per link).
        self._machine_id = -1
        self._id_size = 0

    @property
    def closed(self) -> bool:
        return self._inner.closed

    def send(self, msg: Any) -> None:
        if not self._inner.closed:
            m = self._meter
            m.messages += 1
            m.bytes += self.wire_size(msg)
        self._inner.send(msg)

    def send_report(self, hb: Heartbeat) -> None:
        """``send(hb)`` of a node's common periodic report (no usage reports): what a node
        process reports through, with ``wire_size``'s arithmetic inline (every heartbeat)."""
        inner = self._inner
        if inner.closed:
            return
        m = self._meter
        m.messages += 1
        statuses = hb.statuses
        if hb.usage or statuses is not self._statuses or hb.machine_id != self._machine_id:
            m.bytes += self.wire_size(hb)
        else:
            hid = hb.heartbeat_id
            base = m._heartbeat_base
            m.bytes += (base + self._statuses_size + self._id_size
                        + (1 if 0 <= hid < 0x80 else 3 if 0x100 <= hid < 0x10000 else msgpack_int_size(hid)))
        post = self._post
        if post is not None:
            post(hb)
        else:
            inner.send(hb)

    def wire_size(self, msg: Any) -> int:
        """``len(encode(msg))``, without encoding a periodic heartbeat whose statuses were sized."""
        m = self._meter
        if type(msg) is not Heartbeat or msg.usage:
            return len(m.encoder.encode(msg))
        statuses = msg.statuses
        if statuses is not self._statuses:
            self._statuses = statuses
            self._statuses_size = len(m.encoder.encode(statuses))
        size = self._statuses_size
        base = m._heartbeat_base
        if base < 0:
            base = m.heartbeat_base(msg, size)
        if msg.machine_id != self._machine_id:
            self._machine_id = msg.machine_id
            self._id_size = msgpack_int_size(msg.machine_id)
        hid = msg.heartbeat_id
        # msgpack_int_size(hid) for the ids a run reaches (one call less per heartbeat).
        hid_size = 1 if 0 <= hid < 0x80 else 3 if 0x100 <= hid < 0x10000 else msgpack_int_size(hid)
        return base + size + self._id_size + hid_size

    def close(self) -> None:
        self._inner.close()
