"""A link wrapper counting the messages and wire bytes (msgpack, as the TCP transport would
send them) that go through it; the emulator's measure of load on the RM."""

from __future__ import annotations

from typing import Any

import msgspec

from rm.ports import Link


class Meter:
    __slots__ = ("bytes", "encoder", "messages")

    def __init__(self) -> None:
        self.messages = 0
        self.bytes = 0
        self.encoder = msgspec.msgpack.Encoder()


class MeteredLink:
    __slots__ = ("_inner", "_meter")

    def __init__(self, inner: Link, meter: Meter) -> None:
        self._inner = inner
        self._meter = meter

    @property
    def closed(self) -> bool:
        return self._inner.closed

    def send(self, msg: Any) -> None:
        if not self._inner.closed:
            m = self._meter
            m.messages += 1
            m.bytes += len(m.encoder.encode(msg))
        self._inner.send(msg)

    def close(self) -> None:
        self._inner.close()
