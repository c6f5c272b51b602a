"""Hostile TCP input against a real RM on 127.0.0.1: every abuse case closes only the offending
connection while honest NodeManagers (on their own, already registered connection) keep being
served. Real time at speed 10 (1 s heartbeats = 0.1 s wall); each test is bounded by timeouts."""

from __future__ import annotations

import asyncio
import io
import json
import random
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import pytest

from emulator.experiments.abuse import hostile_payload
from emulator.harness.eventlog import make_logger
from emulator.harness.nodeproc import NodeProcess
from emulator.time.clock import LoopClock, run
from emulator.transport.backoff import Backoff
from emulator.transport.tcp import TcpClient, TcpServer
from nodemanager.config import HeartbeatConfig
from nodemanager.node import NodeState
from nodemanager.stats import NodeCounters
from rm.config import RMConfig
from rm.protocol import Resources
from rm.shell.manager import ResourceManager
from tests.process.test_transport_conformance import eventually

HANDSHAKE_S = 0.5  # wall seconds


def events(sink: io.StringIO) -> list[dict[str, Any]]:
    return [json.loads(line) for line in sink.getvalue().splitlines()]


@dataclass
class Honest:
    rm: ResourceManager
    server: TcpServer
    client: TcpClient
    nodes: list[NodeProcess]
    stats: NodeCounters
    sink: io.StringIO
    clock: LoopClock

    @property
    def address(self) -> tuple[str, int]:
        return self.server.address

    async def still_served(self, beats: int = 3, others: int = 0) -> None:
        """Every honest node gets ``beats`` more answers; none re-registered, none lost
        (``others``: nodes registered by hand besides them)."""
        target = self.stats.heartbeat_responses + beats * len(self.nodes)
        await eventually(self.clock, lambda: self.stats.heartbeat_responses >= target, timeout_s=10)
        assert self.client.stats.reconnects == 0
        assert self.stats.resyncs == 0
        assert all(n.state is NodeState.RUNNING for n in self.nodes)
        snap = self.rm.snapshot()
        assert snap.nodes == len(self.nodes) + others and snap.nodes_unhealthy == 0
        assert snap.counters.nodes_lost == 0


@asynccontextmanager
async def honest_cluster(
    clock: LoopClock, n: int = 3, credentials: str = "", handshake_s: float = HANDSHAKE_S,
    rm_config: RMConfig | None = None, **server_kw: Any,
) -> AsyncIterator[Honest]:
    sink = io.StringIO()
    log = make_logger(clock, sink)
    config = rm_config or RMConfig(credentials=credentials)
    rm = ResourceManager(clock, log, config, heartbeat_mode="periodic")
    server = TcpServer(rm.receive, log, handshake_timeout_s=handshake_s, secret=config.credentials,
                       **server_kw)
    host, port = await server.start("127.0.0.1", 0)
    stats = NodeCounters()
    client = TcpClient(host, port, clock, log, backoff=Backoff(initial_s=0.5, seed=1),
                       secret=config.credentials)
    nodes = [
        NodeProcess(f"honest-{i}", Resources(8, 16), HeartbeatConfig(interval_s=1.0), clock, stats, log,
                    credentials=credentials)
        for i in range(n)
    ]
    for node in nodes:
        client.connect(node)
    loop = asyncio.get_running_loop()
    rm.start()
    tasks = [loop.create_task(client.run())]
    try:
        async with asyncio.timeout(5):
            await client.wait_connected()
        for node in nodes:
            node.start()
        await eventually(clock, lambda: all(nd.state is NodeState.RUNNING for nd in nodes))
        yield Honest(rm, server, client, nodes, stats, sink, clock)
    finally:
        for node in nodes:
            node.stop()
        rm.stop()
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await server.close()


async def hung_up(reader: asyncio.StreamReader, within_s: float) -> bool:
    """True if the server closes the connection within ``within_s`` (whatever it sent first)."""
    try:
        async with asyncio.timeout(within_s):
            while await reader.read(65536):
                pass
        return True
    except ConnectionResetError:
        return True  # aborted by the server
    except TimeoutError:
        return False


CASES = ["garbage", "truncated", "oversized", "wrong_type", "spoof", "slowloris"]


@pytest.mark.parametrize("case", CASES)
def test_each_abuse_case_closes_only_the_offender(case: str) -> None:
    async def main(clock: LoopClock) -> None:
        async with honest_cluster(clock) as h:
            rng = random.Random(7)
            conns = []
            for _ in range(5 if case == "garbage" else 1):  # several random byte strings
                reader, writer = await asyncio.open_connection(*h.address)
                data = hostile_payload(case, rng)
                writer.write(data)
                await writer.drain()
                conns.append((reader, writer))
            for reader, writer in conns:
                if case == "truncated":
                    writer.close()  # abrupt close in the middle of a frame
                else:
                    # Bad frames at once; everything else by the handshake timeout.
                    assert await hung_up(reader, HANDSHAKE_S + 3)
                    writer.close()
            await h.still_served()
            st = h.server.stats
            names = [e["event"] for e in events(h.sink)]
            if case in ("oversized", "wrong_type"):
                assert st.bad_frames == 1 and st.handshake_timeouts == 0
            if case == "slowloris":
                # Silent: the slot is reclaimed after the handshake timeout.
                assert st.handshake_timeouts == 1 and "transport.handshake_timeout" in names
            if case == "spoof":
                # Heartbeats claiming the honest nodes' ids (healthy=False): the first few are
                # refused (resync), the one past the admission budget closes the connection at once;
                # no node marked unhealthy or re-registered (still_served checks that).
                assert st.admission_closed == 1 and st.handshake_timeouts == 0
                assert h.rm.counters().resyncs == h.server.admission_frames // 2  # heartbeat, report, ...
            if case == "garbage":
                assert st.bad_frames + st.handshake_timeouts == 5
            await eventually(clock, lambda: len(h.server.connections) == 1)

    run(main, "realtime", speed=10)


def test_registered_connections_outlive_the_handshake_timeout() -> None:
    async def main(clock: LoopClock) -> None:
        async with honest_cluster(clock) as h:
            await clock.sleep(10 * 3 * HANDSHAKE_S)  # 3 handshake timeouts of wall time at speed 10
            await h.still_served()
            assert h.server.stats.handshake_timeouts == 0

    run(main, "realtime", speed=10)


def test_thousands_of_connections_are_capped_and_honest_nodes_still_served() -> None:
    cap = 64
    total = 2000

    async def main(clock: LoopClock) -> None:
        async with honest_cluster(clock, max_connections=cap, handshake_s=2.0) as h:
            opened: list[asyncio.StreamWriter] = []
            try:
                for start in range(0, total, 250):
                    batch = await asyncio.gather(
                        *(asyncio.open_connection(*h.address) for _ in range(start, min(start + 250, total))),
                        return_exceptions=True,
                    )
                    opened += [item[1] for item in batch if isinstance(item, tuple)]
                st = h.server.stats
                # Past the cap every newcomer takes the slot of the longest idle unregistered
                # connection (the rest wait in the kernel's listen backlog); the registered one is
                # never evicted, so nothing is refused.
                await eventually(clock, lambda: st.evicted >= total // 4, timeout_s=10)
                assert len(h.server.connections) <= cap and st.refused == 0
                await h.still_served()
                # Evictions are logged, but sparsely: a flood must not flood the log.
                evictions = [e for e in events(h.sink) if e["event"] == "transport.evicted"]
                assert 1 <= len(evictions) <= 20 and evictions[-1]["limit"] == cap
                # The silent ones inside the cap are reclaimed by the handshake timeout.
                await eventually(clock, lambda: len(h.server.connections) == 1, timeout_s=10)
            finally:
                for w in opened:
                    w.close()
            # And a newcomer gets in again.
            _, writer = await asyncio.open_connection(*h.address)
            await eventually(clock, lambda: len(h.server.connections) == 2)
            writer.close()
            await h.still_served()

    run(main, "realtime", speed=10)


def test_a_cap_full_of_silent_connections_does_not_lock_a_new_honest_node_out() -> None:
    cap = 16

    async def main(clock: LoopClock) -> None:
        # A handshake timeout far beyond the test: only eviction can make room.
        async with honest_cluster(clock, max_connections=cap, handshake_s=60.0) as h:
            silent = [await asyncio.open_connection(*h.address) for _ in range(3 * cap)]
            st = h.server.stats
            await eventually(clock, lambda: st.evicted >= 2 * cap - 1, timeout_s=10)
            assert len(h.server.connections) == cap
            # A node worker that connects now registers (it evicts the longest idle silent one).
            log = make_logger(clock, None)
            client = TcpClient(*h.address, clock, log, backoff=Backoff(initial_s=0.5, seed=2))
            late = NodeProcess("late", Resources(8, 16), HeartbeatConfig(interval_s=1.0), clock, h.stats, log)
            client.connect(late)
            loop = asyncio.get_running_loop()
            tasks = [loop.create_task(client.run())]
            try:
                async with asyncio.timeout(5):
                    await client.wait_connected()
                late.start()
                await eventually(clock, lambda: late.state is NodeState.RUNNING, timeout_s=10)
                assert client.stats.reconnects == 0 and st.refused == 0
                h.nodes.append(late)
                # More silent connections now evict only silent ones: both registered ones stay.
                silent += [await asyncio.open_connection(*h.address) for _ in range(cap)]
                await eventually(clock, lambda: st.evicted >= 3 * cap, timeout_s=10)
                await h.still_served()
                assert client.stats.reconnects == 0
            finally:
                late.stop()
                for t in tasks:
                    t.cancel()
                await asyncio.gather(*tasks, return_exceptions=True)
                for _, w in silent:
                    w.close()

    run(main, "realtime", speed=10)


def test_a_cap_full_of_registered_connections_refuses_the_newcomer() -> None:
    async def main(clock: LoopClock) -> None:
        # The honest nodes share one (registered) connection, which fills the cap of 1.
        async with honest_cluster(clock, max_connections=1) as h:
            reader, writer = await asyncio.open_connection(*h.address)
            assert await hung_up(reader, 3)
            writer.close()
            assert h.server.stats.refused == 1 and h.server.stats.evicted == 0
            await h.still_served()

    run(main, "realtime", speed=10)
