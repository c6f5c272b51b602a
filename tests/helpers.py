"""Shared test scaffolding: an RM driven synchronously on a virtual clock, with recording links."""

from __future__ import annotations

from typing import Any

from emulator.harness.eventlog import make_logger
from emulator.scenario.loader import scenario_from_dict
from emulator.scenario.schema import Scenario
from emulator.time.clock import LoopClock, VirtualTimeLoop
from rm.config import RMConfig
from rm.manager import ResourceManager
from rm.scheduler.config import SchedulerConfig


class RecordingLink:
    """The RM-side link of one fake node: keeps everything the RM sends."""

    def __init__(self) -> None:
        self.sent: list[Any] = []
        self.closed = False

    def send(self, msg: Any) -> None:
        self.sent.append(msg)

    def close(self) -> None:
        self.closed = True

    def last(self, kind: type) -> Any:
        for msg in reversed(self.sent):
            if isinstance(msg, kind):
                return msg
        raise AssertionError(f"no {kind.__name__} sent; got {[type(m).__name__ for m in self.sent]}")

    def of(self, kind: type) -> list[Any]:
        return [m for m in self.sent if isinstance(m, kind)]


class ManualClock(LoopClock):
    """A virtual clock moved by hand (the loop is never run)."""

    def __init__(self) -> None:
        self.loop = VirtualTimeLoop()
        super().__init__(self.loop)

    def set(self, t: float) -> None:
        self.loop._virtual_now = t

    def close(self) -> None:
        self.loop.close()


def sync_rm(
    config: RMConfig | None = None, scheduler: SchedulerConfig | None = None, mode: str = "periodic"
) -> tuple[ResourceManager, ManualClock]:
    """An RM that handles every message synchronously as it is received."""
    clock = ManualClock()
    rm = ResourceManager(clock, make_logger(clock, None), config, scheduler, mode, queueing=False)
    return rm, clock


def scenario(**sections: Any) -> Scenario:
    data: dict[str, Any] = {
        "cluster": {"nodes": [{"count": 4, "cpu": 8, "ram_gib": 16}]},
        "run": {"duration_s": 60},
    }
    data.update(sections)
    return scenario_from_dict(data, "<test>")
