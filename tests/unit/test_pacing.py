"""The paced real-time clock behind served runs: order, pause, re-pacing (short wall times)."""

from __future__ import annotations

import asyncio

import pytest

from emulator.time.pacing import PacedClock


@pytest.mark.asyncio
async def test_timers_fire_in_emulated_time_order_at_speed() -> None:
    clock = PacedClock(asyncio.get_running_loop(), speed=100.0)
    fired: list[tuple[str, float]] = []
    for name, delay in (("c", 30.0), ("a", 10.0), ("b", 20.0), ("a2", 10.0)):
        clock.call_later(delay, lambda n=name: fired.append((n, clock.now())))
    cancelled = clock.call_later(15.0, lambda: fired.append(("x", clock.now())))
    cancelled.cancel()
    await clock.sleep(35.0)  # 0.35 s of wall time at 100x
    assert [n for n, _ in fired] == ["a", "a2", "b", "c"]
    for (_, t), due in zip(fired, (10.0, 10.0, 20.0, 30.0), strict=True):
        assert due <= t < due + 5.0  # never early; late only by scheduling noise
    assert clock.now() >= 35.0


@pytest.mark.asyncio
async def test_pause_freezes_time_and_timers_resume_continues() -> None:
    loop = asyncio.get_running_loop()
    clock = PacedClock(loop, speed=100.0)
    fired: list[float] = []
    clock.call_later(20.0, lambda: fired.append(clock.now()))
    await clock.sleep(5.0)
    assert clock.pause() and not clock.pause()
    frozen = clock.now()
    await asyncio.sleep(0.3)  # wall time: 30 emulated seconds if the clock were running
    assert clock.now() == frozen and fired == []
    assert clock.resume() and not clock.resume()
    await clock.sleep(20.0)
    assert len(fired) == 1 and 20.0 <= fired[0] < 25.0


@pytest.mark.asyncio
async def test_set_speed_keeps_now_continuous_and_reschedules() -> None:
    clock = PacedClock(asyncio.get_running_loop(), speed=10.0)
    fired = asyncio.Event()
    clock.call_later(50.0, fired.set)  # 5 s of wall time at 10x
    await clock.sleep(1.0)
    before = clock.now()
    clock.set_speed(1000.0)
    assert clock.now() >= before
    async with asyncio.timeout(2.0):  # at 1000x the remaining 49 s take about 0.05 s
        await fired.wait()
    with pytest.raises(ValueError):
        clock.set_speed(0)
