"""structlog wiring: JSON lines stamped with emulated time, built per run (no global config)."""

from __future__ import annotations

import logging
from collections.abc import Mapping, MutableMapping
from typing import Any, Protocol

import msgspec
import structlog


def _dumps(obj: Any, **_: Any) -> str:
    return msgspec.json.encode(obj).decode()


class Now(Protocol):
    def now(self) -> float: ...


class TextSink(Protocol):
    """Where event lines go: a text file, or anything with ``write`` and ``flush``."""

    def write(self, text: str, /) -> int: ...

    def flush(self) -> None: ...


def make_logger(clock: Now, sink: TextSink | None, level: int = logging.INFO) -> Any:
    """A bound logger writing one JSON object per event to ``sink`` (or nowhere)."""

    def stamp(_: Any, method: str, event: MutableMapping[str, Any]) -> Mapping[str, Any]:
        name = event.pop("event", "")
        return {"t": round(clock.now(), 6), "event": name, "level": method, **event}

    if sink is None:
        return structlog.wrap_logger(
            structlog.ReturnLogger(),
            processors=[],
            wrapper_class=structlog.make_filtering_bound_logger(logging.CRITICAL),
        )
    return structlog.wrap_logger(
        structlog.WriteLogger(sink),  # type: ignore[arg-type]  # a TextSink is all it uses
        processors=[stamp, structlog.processors.JSONRenderer(serializer=_dumps)],
        wrapper_class=structlog.make_filtering_bound_logger(level),
        context_class=dict,
    )
