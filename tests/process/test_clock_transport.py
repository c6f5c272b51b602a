"""The virtual and real-time clocks, and the in-memory transport's delivery rules."""

from __future__ import annotations

import asyncio
from typing import Any

from emulator.time.clock import LoopClock, run, wall_time
from emulator.transport.memory import MemoryNetwork
from rm.protocol import Disconnected


def test_virtual_time_jumps_to_the_next_timer_instantly() -> None:
    async def main(clock: LoopClock) -> tuple[float, list[tuple[float, str]]]:
        seen: list[tuple[float, str]] = []

        async def worker(name: str, period: float) -> None:
            for _ in range(3):
                await clock.sleep(period)
                seen.append((clock.now(), name))

        start = wall_time()
        async with asyncio.TaskGroup() as tg:
            tg.create_task(worker("slow", 3600.0))
            tg.create_task(worker("fast", 1000.0))
        return wall_time() - start, seen

    elapsed, seen = run(main, "virtual")
    assert elapsed < 1.0
    assert seen == [
        (1000.0, "fast"),
        (2000.0, "fast"),
        (3000.0, "fast"),
        (3600.0, "slow"),
        (7200.0, "slow"),
        (10800.0, "slow"),
    ]


def test_realtime_clock_runs_speed_times_faster_than_the_wall() -> None:
    async def main(clock: LoopClock) -> tuple[float, float]:
        start = wall_time()
        await clock.sleep(5.0)  # 5 emulated seconds at speed 100 = 50 ms
        return wall_time() - start, clock.now()

    wall, emulated = run(main, "realtime", speed=100.0)
    # A loaded machine can only make it late, never early; 2 s bounds "speed was applied".
    assert 0.049 <= wall < 2.0
    assert emulated >= 5.0 - 1e-9


class Endpoint:
    def __init__(self) -> None:
        self.got: list[tuple[float, Any]] = []
        self.link: Any = None
        self.clock: LoopClock | None = None

    def attach(self, link: Any) -> None:
        self.link = link

    def resync(self) -> None:
        pass

    def receive(self, *args: Any) -> None:
        assert self.clock is not None
        self.got.append((self.clock.now(), args[-1]))
        if len(args) == 2 and args[1] == "ping":  # RM side: answer on the link it came on
            args[0].send("pong")


def test_memory_transport_delivers_in_order_with_latency_and_stops_when_closed() -> None:
    async def main(clock: LoopClock) -> tuple[list, list]:
        rm, node = Endpoint(), Endpoint()
        rm.clock = node.clock = clock
        MemoryNetwork(clock, rm.receive, latency_s=0.25).connect(node)
        for i in range(3):
            node.link.send(i)
        node.link.send("ping")
        await clock.sleep(1.0)
        node.link.close()
        node.link.send("lost")
        await clock.sleep(1.0)
        return rm.got, node.got

    rm_got, node_got = run(main, "virtual")
    # The node closing its end is news for the RM, at once; what it sends afterwards is lost.
    assert rm_got == [(0.25, 0), (0.25, 1), (0.25, 2), (0.25, "ping"), (1.0, Disconnected())]
    assert node_got == [(0.5, "pong")]
