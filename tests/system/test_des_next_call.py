"""A batched call made by the last callback of a pass, while nothing else is ready, runs in that
pass (a heartbeat's delivery and its answer: one pass, not three) only when the next pass would
have run it first: the order stays asyncio's, ties, cancels and stops included."""

from __future__ import annotations

import random

from emulator.time.clock import Cancellable, LoopClock, run
from emulator.time.desloop import DesLoop, VirtualCore


def _chain_program(core: VirtualCore, seed: int) -> list[tuple[float, str]]:
    """Callbacks that end in chains of batched calls (deliveries answered by deliveries), with
    zero-delay timers and plain calls made before and after them, timers at distinct times (most
    passes run one callback) and on a grid (ties), cancels one by one and in bulk (sweeps)."""

    async def main(clock: LoopClock) -> list[tuple[float, str]]:
        rng = random.Random(seed)
        trace: list[tuple[float, str]] = []
        timers: list[Cancellable] = []

        def act(name: str, depth: int) -> None:
            trace.append((clock.now(), name))
            if depth >= 7:
                return
            for k in range(rng.randint(0, 3)):
                label = f"{name}.{k}"
                r = rng.random()
                if r < 0.45:
                    clock.call_soon_batched(hop, (label, depth + 1))
                elif r < 0.55:
                    clock.call_soon(act, label, depth + 1)
                else:
                    delay = rng.choice((0.0, 0.0, 0.125, 1.0, rng.random() * 3))
                    timers.append(clock.call_later(delay, act, label, depth + 1))
            r = rng.random()
            if timers and r < 0.25:
                timers.pop(rng.randrange(len(timers))).cancel()
            elif r > 0.998:
                for t in timers[: len(timers) * 3 // 4]:  # most timers at once: a sweep
                    t.cancel()

        def hop(item: tuple[str, int]) -> None:
            act(*item)

        for i in range(400):
            at = rng.random() * 20 if i % 2 else rng.randrange(40) * 0.5
            timers.append(clock.call_later(at, act, f"r{i}", 0))
        await clock.sleep(40.0)
        return trace

    result: list[tuple[float, str]] = run(main, "virtual", core=core)
    return result


def test_chains_of_batched_calls_run_in_asyncios_order() -> None:
    for seed in range(4):
        des = _chain_program("des", seed)
        assert len(des) > 1000
        assert des == _chain_program("asyncio", seed)


def test_a_batched_call_after_a_stop_waits_for_the_next_run() -> None:
    """The last callback of a pass stops the loop, then makes a batched call with nothing else
    ready: a stopped loop has not run it yet (the next pass would not have come)."""
    loop = DesLoop()
    try:
        seen: list[str] = []

        def stopper() -> None:
            loop.stop()
            loop.call_soon_batched(seen.append, "after stop")

        loop.call_soon(stopper)
        loop.run_forever()
        assert seen == []
        loop.call_soon(loop.stop)
        loop.run_forever()
        assert seen == ["after stop"]
    finally:
        loop.close()


def test_a_batched_call_made_outside_the_loop_keeps_its_place() -> None:
    """Made before the loop runs (nothing ready), then a plain call or a timer due at once: the
    batched call runs first, as a ready callback does."""
    for then_plain in (True, False):
        loop = DesLoop()
        try:
            seen: list[str] = []
            loop.call_soon_batched(seen.append, "batched")
            if then_plain:
                loop.call_soon(seen.append, "plain")
            else:
                loop.call_later(0.0, seen.append, "timer")
            loop.call_later(0.0, loop.stop)
            loop.run_forever()
            assert seen == ["batched", "plain" if then_plain else "timer"]
        finally:
            loop.close()


def _sweep_program(core: VirtualCore, seed: int) -> list[str]:
    """Many timers tied at a few instants, most cancelled (the next pass sweeps them), and a
    batched call that adds more to the tie: it must come after the sweep, as on asyncio's loop."""

    async def main(clock: LoopClock) -> list[str]:
        rng = random.Random(seed)
        seen: list[str] = []
        tied = [clock.call_later(rng.choice((10.0, 11.0, 12.0)), seen.append, f"t{i}") for i in range(150)]

        def deliver(n: int) -> None:
            for j in range(n):
                clock.call_later(rng.choice((10.0, 11.0, 12.0)) - clock.now(), seen.append, f"late{j}")

        def cancel_and_send() -> None:
            for i in rng.sample(range(150), 100):
                tied[i].cancel()
            clock.call_soon_batched(deliver, 40)

        clock.call_later(1.0, cancel_and_send)
        await clock.sleep(20.0)
        return seen

    result: list[str] = run(main, "virtual", core=core)
    return result


def test_a_batched_call_runs_after_the_sweep_of_cancelled_timers() -> None:
    for seed in range(6):  # 3, 4 and 5 tell the orders apart
        des = _sweep_program("des", seed)
        assert len(des) == 90
        assert des == _sweep_program("asyncio", seed)
