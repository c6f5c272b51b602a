"""The node host's timer wheel: never early, in order, cancellable, one loop timer for many."""

from __future__ import annotations

import asyncio
import itertools

import pytest

from emulator.time.clock import RealClock
from emulator.time.wheel import WheelClock


@pytest.mark.asyncio
async def test_timers_fire_in_order_never_early_and_cancel() -> None:
    loop = asyncio.get_running_loop()
    wheel = WheelClock(RealClock(loop, speed=10.0), slot_wall_s=0.002)
    fired: list[tuple[int, float]] = []
    due: dict[int, float] = {}
    for i in range(200):
        delay = 0.05 + (i * 7 % 40) * 0.01  # emulated s: 50-440 ms, many sharing a slot
        due[i] = wheel.now() + delay
        wheel.call_later(delay, lambda i=i: fired.append((i, wheel.now())))
    cancelled = wheel.call_later(0.2, lambda: fired.append((-1, wheel.now())))
    cancelled.cancel()
    await wheel.sleep(0.6)
    assert [i for i, _ in fired if i < 0] == []
    assert sorted(i for i, _ in fired) == list(range(200))
    for i, t in fired:
        assert t >= due[i] - 1e-9, f"timer {i} fired {due[i] - t:.4f} s early"
    times = [due[i] for i, _ in fired]
    # In order of their slots: a timer never runs after one due a whole slot later.
    slot = 0.002 * 10.0
    assert all(b >= a - slot for a, b in itertools.pairwise(times))


@pytest.mark.asyncio
async def test_many_timers_share_few_loop_wakeups() -> None:
    loop = asyncio.get_running_loop()
    wheel = WheelClock(RealClock(loop, speed=1.0), slot_wall_s=0.005)
    count = 0

    def hit() -> None:
        nonlocal count
        count += 1

    for _ in range(5000):
        wheel.call_later(0.01, hit)
    # One slot holds them all: the wheel keeps one loop timer, not 5,000.
    assert len(loop._scheduled) <= 2  # type: ignore[attr-defined]
    await asyncio.sleep(0.05)
    assert count == 5000
    assert wheel.pending == 0


@pytest.mark.asyncio
async def test_a_callback_that_rearms_itself_runs_once_per_slot() -> None:
    loop = asyncio.get_running_loop()
    wheel = WheelClock(RealClock(loop, speed=1.0), slot_wall_s=0.002)
    runs = 0

    def again() -> None:
        nonlocal runs
        runs += 1
        wheel.call_later(0.0, again)

    wheel.call_later(0.0, again)
    await asyncio.sleep(0.05)
    # Re-armed "now" goes to the next slot: about 25 runs in 50 ms, not a spin.
    assert 5 <= runs <= 40
