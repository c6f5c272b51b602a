"""The run's event log, kept in memory for the page while still written to events.jsonl."""

from __future__ import annotations

import itertools
from collections import deque
from typing import IO, Any

import msgspec

_decode = msgspec.json.Decoder(dict[str, Any]).decode


class EventBuffer:
    """The last ``capacity`` events, each with a sequence number so a client can ask for "after N"."""

    def __init__(self, capacity: int = 5000) -> None:
        self._items: deque[dict[str, Any]] = deque(maxlen=capacity)
        self._seq = itertools.count(1)
        self.total = 0
        self.listeners: list[Any] = []

    def add(self, event: dict[str, Any]) -> None:
        event["seq"] = next(self._seq)
        self.total += 1
        self._items.append(event)
        for listener in self.listeners:
            listener(event)

    @property
    def last_seq(self) -> int:
        return self._items[-1]["seq"] if self._items else 0

    def since(self, seq: int, limit: int = 500, kinds: tuple[str, ...] = ()) -> list[dict[str, Any]]:
        """Events with a sequence number above ``seq``, oldest first, at most the newest ``limit``."""
        out: list[dict[str, Any]] = []
        for ev in reversed(self._items):
            if ev["seq"] <= seq:
                break
            if not kinds or any(ev.get("event", "").startswith(k) for k in kinds):
                out.append(ev)
                if len(out) >= limit:
                    break
        out.reverse()
        return out


class EventTap:
    """A text sink for structlog's WriteLogger: passes lines on to ``inner`` (the events.jsonl
    file, if any) and decodes each JSON line into ``buffer``."""

    def __init__(self, buffer: EventBuffer, inner: IO[str] | None = None) -> None:
        self.buffer = buffer
        self._inner = inner
        self.closed = False
        self.dropped = 0  # lines written after close (none when the run stopped cleanly)

    def close(self) -> None:
        """The run is over: close the file; anything logged later is counted, not written."""
        self.closed = True
        if self._inner is not None:
            self._inner.close()
            self._inner = None

    def write(self, text: str) -> int:
        if self.closed:
            self.dropped += text.count("\n")
            return len(text)
        if self._inner is not None:
            self._inner.write(text)
        for line in text.splitlines():
            if line:
                try:
                    self.buffer.add(_decode(line))
                except msgspec.DecodeError:
                    self.buffer.add({"event": "log.unparsed", "text": line[:200]})
        return len(text)

    def flush(self) -> None:
        if self._inner is not None:
            self._inner.flush()
