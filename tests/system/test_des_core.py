"""The discrete-event core runs every callback when asyncio's loop ran it, ties included, so a
scenario and seed give the same result on both cores."""

from __future__ import annotations

import asyncio
import random
from pathlib import Path

from emulator.harness.runner import run_blocking
from emulator.scenario.loader import load_scenario
from emulator.time.clock import Cancellable, LoopClock, run
from emulator.time.desloop import DesLoop, VirtualCore

SCENARIOS = Path(__file__).resolve().parents[2] / "scenarios"


def _program(core: VirtualCore, seed: int) -> list[tuple[float, str]]:
    """Callbacks that set timers on a few fixed delays (many ties), cancel some, call_soon
    others, and a coroutine sleeping beside them; returns what ran when."""

    async def main(clock: LoopClock) -> list[tuple[float, str]]:
        rng = random.Random(seed)
        trace: list[tuple[float, str]] = []
        timers: list[Cancellable] = []

        def fire(name: str, depth: int) -> None:
            trace.append((clock.now(), name))
            if depth >= 5:
                return
            for k in range(rng.randint(0, 3)):
                label = f"{name}.{k}"
                if rng.random() < 0.15:
                    clock.call_soon(fire, label, depth + 1)
                elif rng.random() < 0.3:
                    # Runs of batched calls, interleaved with plain ones and zero-delay timers.
                    for j in range(rng.randint(1, 4)):
                        clock.call_soon_batched(batched, (f"{label}b{j}", depth + 1))
                else:
                    delay = rng.choice((0.0, 0.5, 1.0, 1.0, 2.5))
                    timers.append(clock.call_later(delay, fire, label, depth + 1))
            if timers and rng.random() < 0.25:
                timers.pop(rng.randrange(len(timers))).cancel()

        def batched(item: tuple[str, int]) -> None:
            fire(*item)

        async def sleeper() -> None:
            for i in range(20):
                await clock.sleep(0.5)
                trace.append((clock.now(), f"sleeper{i}"))

        for i in range(200):
            clock.call_later(rng.choice((0.0, 1.0, 2.0)), fire, f"r{i}", 0)
        task = asyncio.get_running_loop().create_task(sleeper())
        await clock.sleep(60.0)
        await task
        return trace

    result: list[tuple[float, str]] = run(main, "virtual", core=core)
    return result


def test_callbacks_run_in_the_same_order_on_both_cores() -> None:
    for seed in range(3):
        des = _program("des", seed)
        assert len(des) > 1000
        assert des == _program("asyncio", seed)


def test_back_to_back_batched_calls_share_one_queue_entry() -> None:
    """An RM broadcast of 1,000 deliveries is one entry of the core's ready queue, not 1,000."""

    async def main(clock: LoopClock) -> tuple[int, list[int]]:
        loop = asyncio.get_running_loop()
        assert isinstance(loop, DesLoop)
        seen: list[int] = []
        deliver = seen.append  # one callback object (each ``seen.append`` is a new one)
        for i in range(1000):
            clock.call_soon_batched(deliver, i)
        entries = len(vars(loop)["_ready"])
        await clock.sleep(0.0)
        return entries, seen

    entries, seen = run(main, "virtual", core="des")
    assert entries == 1
    assert seen == list(range(1000))


def test_a_batched_call_made_during_a_pass_runs_in_the_next_one() -> None:
    """As a separate call would: a loop stopped in this pass has not run it yet."""
    loop = DesLoop()
    try:
        seen: list[str] = []
        deliver = seen.append

        def stopper() -> None:
            loop.stop()
            loop.call_soon_batched(deliver, "b2")

        loop.call_soon(stopper)
        loop.call_soon_batched(deliver, "b1")
        loop.run_forever()
        assert seen == ["b1"]
        loop.call_soon(loop.stop)
        loop.run_forever()
        assert seen == ["b1", "b2"]
    finally:
        loop.close()


def test_a_failing_callback_is_reported_and_the_run_goes_on() -> None:
    async def main(clock: LoopClock) -> list[str]:
        seen: list[str] = []
        errors: list[str] = []
        loop = asyncio.get_running_loop()
        loop.set_exception_handler(lambda _loop, ctx: errors.append(str(ctx["exception"])))

        def boom() -> None:
            raise RuntimeError("boom")

        clock.call_later(1.0, boom)
        clock.call_later(2.0, seen.append, "after")
        await clock.sleep(3.0)
        return seen + errors

    assert run(main, "virtual", core="des") == ["after", "boom"]


def test_a_scenario_gives_the_same_results_on_both_cores(tmp_path: Path) -> None:
    scenario = load_scenario(SCENARIOS / "quickstart.toml", {"run": {"duration_s": 900.0}})
    des = run_blocking(scenario, tmp_path / "des.jsonl", core="des")
    old = run_blocking(scenario, tmp_path / "asyncio.jsonl", core="asyncio")
    assert (tmp_path / "des.jsonl").read_bytes() == (tmp_path / "asyncio.jsonl").read_bytes()
    assert des.rm.counters == old.rm.counters
    assert des.nodes == old.nodes


def _gated_program(core: VirtualCore, seed: int) -> list[tuple[float, str]]:
    """Timers of three processes through their gates (``GatedClock``: on the discrete-event core
    the gate rides in the event, on asyncio's loop each timer calls ``gate.run``), with pauses
    that hold them, some longer than others and some overlapping; returns what ran when."""
    from emulator.harness.nodeproc import GatedClock, ProcessGate

    async def main(clock: LoopClock) -> list[tuple[float, str]]:
        rng = random.Random(seed)
        trace: list[tuple[float, str]] = []
        gates = [ProcessGate(clock) for _ in range(3)]
        clocks = [GatedClock(clock, g) for g in gates]
        timers: list[Cancellable] = []

        def fire(p: int, name: str, depth: int) -> None:
            trace.append((clock.now(), name))
            if depth >= 6:
                return
            for k in range(rng.randint(0, 3)):
                q = rng.randrange(3) if rng.random() < 0.2 else p
                delay = rng.choice((0.0, 0.5, 1.0, 1.0, 2.5))
                timers.append(clocks[q].call_later(delay, fire, q, f"{name}.{k}", depth + 1))
            if timers and rng.random() < 0.2:
                timers.pop(rng.randrange(len(timers))).cancel()

        def pause(p: int) -> None:
            trace.append((clock.now(), f"pause{p}"))
            gates[p].pause(rng.choice((0.5, 1.0, 3.0)))

        for i in range(150):
            p = rng.randrange(3)
            clocks[p].call_later(rng.choice((0.0, 1.0, 2.0)), fire, p, f"r{i}", 0)
        for _ in range(12):
            clock.call_later(rng.choice((0.5, 1.0, 1.5, 2.0, 4.0)), pause, rng.randrange(3))
        await clock.sleep(60.0)
        return trace

    result: list[tuple[float, str]] = run(main, "virtual", core=core)
    return result


def test_gated_timers_run_and_are_held_in_the_same_order_on_both_cores() -> None:
    for seed in range(3):
        des = _gated_program("des", seed)
        assert len(des) > 500 and any(name.startswith("pause") for _, name in des)
        assert des == _gated_program("asyncio", seed)


def test_a_timer_is_a_handle_whatever_its_time() -> None:
    """A timer (its own heap entry, the float of its time) still behaves as a handle: true at
    time 0, its time from ``when()``, unhashable, and a cancel counts once among the cancelled
    timers (a cancelled timer runs nothing)."""

    async def main(clock: LoopClock) -> list[str]:
        loop = asyncio.get_running_loop()
        assert isinstance(loop, DesLoop)
        ran: list[str] = []
        at_zero = loop.call_at(0.0, ran.append, "zero")
        later = loop.call_later(2.0, ran.append, "later")
        assert at_zero and later.when() == 2.0 and not later.cancelled()
        try:
            hash(later)
        except TypeError:
            pass
        else:
            raise AssertionError("a timer hashed as its time")
        before = loop._cancelled_timers
        later.cancel()
        later.cancel()
        assert later.cancelled() and loop._cancelled_timers == before + 1
        await clock.sleep(3.0)
        return ran

    assert run(main, "virtual", core="des") == ["zero"]
