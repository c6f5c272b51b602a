"""structlog wiring: JSON lines stamped with emulated time, built per run (no global config)."""

from __future__ import annotations

import logging
from typing import IO, Any

import msgspec
import structlog

from emulator.time.clock import LoopClock


def _dumps(obj: Any, **_: Any) -> str:
    return msgspec.json.encode(obj).decode()


def make_logger(clock: LoopClock, sink: IO[str] | None, level: int = logging.INFO) -> Any:
    """A bound logger writing one JSON object per event to ``sink`` (or nowhere)."""

    def stamp(_: Any, method: str, event: dict[str, Any]) -> dict[str, Any]:
        name = event.pop("event", "")
        return {"t": round(clock.now(), 6), "event": name, "level": method, **event}

    if sink is None:
        return structlog.wrap_logger(
            structlog.ReturnLogger(),
            processors=[],
            wrapper_class=structlog.make_filtering_bound_logger(logging.CRITICAL),
        )
    return structlog.wrap_logger(
        structlog.WriteLogger(sink),
        processors=[stamp, structlog.processors.JSONRenderer(serializer=_dumps)],
        wrapper_class=structlog.make_filtering_bound_logger(level),
        context_class=dict,
    )
