"""Shared test scaffolding: a fake clock, an RM driven synchronously by hand, recording links."""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Callable
from pathlib import Path
from typing import Any

from emulator.harness.eventlog import make_logger
from emulator.harness.outcome import RunOutcome
from emulator.harness.runner import RunHandle, run_scenario
from emulator.measure.sampler import SampleRow
from emulator.scenario.loader import scenario_from_dict
from emulator.scenario.schema import Scenario
from emulator.time.clock import LoopClock, run
from rm.config import RMConfig
from rm.scheduler.config import SchedulerConfig
from rm.shell.manager import ResourceManager
from rm.state.cluster import NodeRecord
from rm.views.snapshot import NodeView


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


class FakeTimer:
    __slots__ = ("args", "callback", "cancelled", "when")

    def __init__(self, when: float, callback: Callable[..., object], args: tuple[Any, ...]) -> None:
        self.when = when
        self.callback = callback
        self.args = args
        self.cancelled = False

    def cancel(self) -> None:
        self.cancelled = True


class FakeClock:
    """Time that moves only when a test says so; timers fire in (time, order) when it does.
    No event loop: what components do between two ``advance`` calls is all there is."""

    def __init__(self, t: float = 0.0) -> None:
        self.t = t
        self._heap: list[tuple[float, int, FakeTimer]] = []
        self._seq = itertools.count()

    def now(self) -> float:
        return self.t

    def call_later(self, delay: float, callback: Callable[..., object], *args: Any) -> FakeTimer:
        timer = FakeTimer(self.t + max(0.0, delay), callback, args)
        heapq.heappush(self._heap, (timer.when, next(self._seq), timer))
        return timer

    def call_soon(self, callback: Callable[..., object], *args: Any) -> FakeTimer:
        return self.call_later(0.0, callback, *args)

    def call_soon_batched(self, callback: Callable[[Any], object], item: Any) -> None:
        self.call_later(0.0, callback, item)

    def advance_to(self, t: float) -> None:
        """Fire every timer due up to ``t`` (in order, including ones they arm), then stand at ``t``."""
        heap = self._heap
        while heap and heap[0][0] <= t:
            when, _, timer = heapq.heappop(heap)
            if timer.cancelled:
                continue
            self.t = max(self.t, when)
            timer.cancelled = True
            self._fire(timer)
        self.t = max(self.t, t)

    def _fire(self, timer: FakeTimer) -> None:
        """Run a due timer (a bench's clock times some of them)."""
        timer.callback(*timer.args)

    def set(self, t: float) -> None:
        """Move to ``t`` (firing what is due)."""
        self.advance_to(t)

    def pending(self) -> int:
        return sum(1 for _, _, timer in self._heap if not timer.cancelled)


def sync_rm(
    config: RMConfig | None = None, scheduler: SchedulerConfig | None = None, mode: str = "periodic"
) -> tuple[ResourceManager, FakeClock]:
    """An RM on a fake clock: it handles every message as it is received."""
    clock = FakeClock()
    rm = ResourceManager(clock, make_logger(clock, None), config, scheduler, mode)
    return rm, clock


def scenario(**sections: Any) -> Scenario:
    data: dict[str, Any] = {
        "cluster": {"nodes": [{"count": 4, "cpu": 8, "ram_gib": 16}]},
        "run": {"duration_s": 60},
    }
    data.update(sections)
    return scenario_from_dict(data, "<test>")


def node_view(rm: ResourceManager, machine_id: int) -> NodeView:
    """The RM's view of node ``machine_id`` (it must be registered)."""
    for n in rm.nodes_view():
        if n.machine_id == machine_id:
            return n
    raise AssertionError(f"node {machine_id} is not registered")


def run_with_handle(
    sc: Scenario, events_path: Path | None = None, check_invariants: bool | None = None,
    on_row: Callable[[RunHandle, SampleRow], None] | None = None,
    on_start: Callable[[RunHandle], None] | None = None,
) -> tuple[RunOutcome, RunHandle]:
    """Run ``sc`` in memory and keep hold of the run's parts (RM side, node processes) for
    white-box assertions during (``on_start``, ``on_row`` at every sample) and after the run."""
    handles: list[RunHandle] = []

    def started(handle: RunHandle) -> None:
        handles.append(handle)
        if on_start is not None:
            on_start(handle)
        if on_row is not None:
            handle.side.on_sample(lambda row: on_row(handle, row))

    async def main(clock: LoopClock) -> RunOutcome:
        if events_path is None:
            return await run_scenario(sc, clock, None, None, check_invariants, on_start=started)
        with events_path.open("w", encoding="utf-8") as sink:
            return await run_scenario(
                sc, clock, sink, None, check_invariants, on_start=started,
                journal_dir=events_path.parent,
            )

    out: RunOutcome = run(main, sc.run.clock, sc.run.speed)
    return out, handles[0]


def record(rm: ResourceManager, machine_id: int) -> NodeRecord:
    """The RM's own record of node ``machine_id`` (white-box tests of the protocol rules)."""
    node = rm.node(machine_id)
    assert node is not None, f"node {machine_id} is not registered"
    return node
