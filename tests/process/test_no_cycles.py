"""A real-time run leaves no reference cycle for the garbage collector: the RM, the nodes, the ring
and the workload free what they build by reference counting alone. Real-time runs rely on it
(``emulator.harness.quietgc`` turns the automatic collector off for the run: a young collection
held the loop for 20-85 ms at E2's sizes); a cycle built per heartbeat, timer or sample would
be memory that is never freed."""

from __future__ import annotations

import gc
from collections import Counter
from typing import Any

import pytest

from emulator.harness.runner import RunHandle
from emulator.measure.sampler import SampleRow
from emulator.scenario.loader import scenario_from_dict
from tests.helpers import run_with_handle
from tests.ring_support import ring_scenario

OURS = ("rm.", "nodemanager.", "ringmon.", "emulator.")


def _ours(obj: Any) -> str | None:
    """The qualified name of ``obj`` (or of the function or method it is) if our code made it."""
    target = getattr(obj, "__func__", obj)
    module = getattr(type(obj), "__module__", "") or ""
    if isinstance(target, type(_ours)) or hasattr(target, "__code__"):
        module = getattr(target, "__module__", "") or ""
        return f"{module}.{getattr(target, '__qualname__', '?')}" if module.startswith(OURS) else None
    return f"{module}.{type(obj).__qualname__}" if module.startswith(OURS) else None


@pytest.mark.parametrize("mode", ["periodic", "delta"])
def test_a_real_time_run_builds_no_reference_cycles_as_it_goes(mode: str) -> None:
    """Between two samples of a running cluster (jobs starting and ending, heartbeats, ring
    liveness, samples): the cycles found then, not the run's own structures freed at its end."""
    data = ring_scenario(nodes=60, duration_s=90.0, mode=mode, job_count=300)
    data["run"].update(clock="realtime", speed=30)
    scenario = scenario_from_dict(data, "<test>")
    found: Counter[str] = Counter()
    window: list[float] = []

    def on_row(_: RunHandle, row: SampleRow) -> None:
        if row.t_s < 30.0 or len(window) == 2:
            return
        gc.collect()
        if window:  # the end of the window: what became garbage since its start
            found.update(name for o in gc.garbage if (name := _ours(o)) is not None)
        gc.garbage.clear()
        window.append(row.t_s)

    gc.collect()  # what earlier tests left
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        outcome, _ = run_with_handle(scenario, on_row=on_row)
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
    assert outcome.nodes.heartbeats_sent > 0 and outcome.rm.counters.allocations > 0
    assert len(window) == 2 and window[1] - window[0] >= 3.0
    assert not found, f"reference cycles built during the run: {found.most_common(10)}"
