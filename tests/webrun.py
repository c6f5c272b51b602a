"""Shared helpers of the status-page tests: a small scenario and a served run on 127.0.0.1:0."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import aiohttp

from emulator.scenario.loader import scenario_from_dict
from emulator.scenario.schema import Scenario
from emulator.web.guard import TOKEN_HEADER
from emulator.web.serve import serve_scenario
from emulator.web.state import LiveRun

# Every test run is bounded: the served run stops itself after this many wall seconds at most.
MAX_WALL_S = 60.0


def small_scenario(nodes: int = 12, duration_s: float = 600.0, speed: float = 20.0,
                   expiry_s: float = 6.0, interval_s: float = 1.0, faults: list[dict[str, Any]] | None = None,
                   **run: Any) -> Scenario:
    """Periodic heartbeats (every 1 s unless told), a fast liveliness monitor, two looping users
    that keep the cluster about 80% busy whatever its size; ``faults``: the scenario's own."""
    return scenario_from_dict({
        "name": "web-test",
        "cluster": {"nodes": [{"count": nodes, "cpu": 16, "ram_gib": 64, "name": "n"}]},
        "heartbeat": {"mode": "periodic", "interval_s": interval_s},
        "rm": {"expiry_s": expiry_s, "monitor_interval_s": 1.0},
        "workload": {
            "pools": [{"name": "prod", "weight": 2.0}, {"name": "batch"}],
            "operations": [
                {"name": "web", "pool": "prod", "cpu": 2, "ram_gib": 4, "job_count": 4 * nodes,
                 "seconds_mean": 20, "seconds_deviation": 5, "loop": True},
                {"name": "etl", "pool": "batch", "cpu": 1, "ram_gib": 8, "job_count": 5 * nodes,
                 "seconds_mean": 30, "seconds_deviation": 5, "loop": True},
            ],
        },
        "faults": faults or [],
        "run": {"duration_s": duration_s, "clock": "realtime", "speed": speed, "seed": 3, **run},
    })


@dataclass
class Served:
    url: str
    live: LiveRun
    task: asyncio.Task[Any]

    def session(self) -> aiohttp.ClientSession:
        """A client as the page is one: it sends the run's control token."""
        return aiohttp.ClientSession(headers={TOKEN_HEADER: self.live.control_token})


@contextlib.asynccontextmanager
async def served(scenario: Scenario, allow_control: bool = False, push_interval_s: float = 0.5,
                 linger_s: float = 30.0,
                 allowed_hosts: frozenset[str] = frozenset()) -> AsyncIterator[Served]:
    ready: asyncio.Future[str] = asyncio.get_running_loop().create_future()
    live = LiveRun(scenario, allow_control=allow_control)

    def on_ready(url: str) -> None:
        ready.set_result(url)

    async def main() -> Any:
        async with asyncio.timeout(MAX_WALL_S):
            return await serve_scenario(
                scenario, "127.0.0.1", 0, on_ready=on_ready, linger_s=linger_s,
                push_interval_s=push_interval_s, live=live, allowed_hosts=allowed_hosts,
            )

    task = asyncio.create_task(main())
    url = await asyncio.wait_for(ready, 10)
    try:
        yield Served(url, live, task)
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def wait_for(predicate: Any, timeout_s: float = 20.0, every_s: float = 0.1) -> Any:
    """Poll an async predicate until it returns something truthy (bounded)."""
    async with asyncio.timeout(timeout_s):
        while True:
            value = await predicate()
            if value:
                return value
            await asyncio.sleep(every_s)
