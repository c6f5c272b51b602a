"""TCP connections on 127.0.0.1: a bad peer is cut off and logged without disturbing anyone else;
a dropped node connection comes back with backoff and resyncs with the RM."""

from __future__ import annotations

import asyncio
import io
import json
from typing import Any

import msgspec
import pytest

from emulator.harness.eventlog import make_logger
from emulator.harness.nodeproc import NodeProcess
from emulator.time.clock import LoopClock, run
from emulator.transport.backoff import Backoff
from emulator.transport.framing import HEADER, FrameEncoder
from emulator.transport.tcp import TcpClient, TcpServer
from nodemanager.config import HeartbeatConfig
from nodemanager.node import NodeState
from nodemanager.stats import NodeCounters
from rm.protocol import Heartbeat, HeartbeatResponse, Register, Resources
from rm.shell.manager import ResourceManager
from rm.state.operations import OperationSpec
from tests.helpers import node_view
from tests.process.test_transport_conformance import FakeNode, eventually


def events(sink: io.StringIO) -> list[dict[str, Any]]:
    return [json.loads(line) for line in sink.getvalue().splitlines()]


BAD_INPUTS = {
    "garbage": HEADER.pack(4, 1) + b"\xc1\xc1\xc1\xc1",
    "oversized": HEADER.pack(10_000_000, 1),
    "wrong-type": FrameEncoder().encode(1, HeartbeatResponse(action="normal", heartbeat_id=1)),
    "truncated": FrameEncoder().encode(1, Register(address="x", resources=Resources(8, 16)))[:-3],
}


@pytest.mark.parametrize("bad", list(BAD_INPUTS))
def test_a_bad_connection_is_closed_logged_and_isolated(bad: str) -> None:
    expected_event = {
        "garbage": "transport.bad_frame",
        "oversized": "transport.frame_too_large",
        "wrong-type": "transport.bad_frame",
        "truncated": "transport.disconnected",
    }[bad]

    async def main(clock: LoopClock) -> None:
        sink = io.StringIO()
        log = make_logger(clock, sink)
        got: list[tuple[Any, Any]] = []
        server = TcpServer(lambda link, msg: got.append((link, msg)), log)
        host, port = await server.start("127.0.0.1", 0)
        good = FakeNode()
        client = TcpClient(host, port, clock, log)
        task = asyncio.get_running_loop().create_task(client.run())
        try:
            async with asyncio.timeout(5):
                await client.wait_connected()
            client.connect(good)
            good.link.send(Register(address="good", resources=Resources(8, 16)))
            await eventually(clock, lambda: len(got) == 1)

            reader, writer = await asyncio.open_connection(host, port)
            writer.write(BAD_INPUTS[bad])
            await writer.drain()
            if bad == "truncated":
                writer.close()  # abrupt close in the middle of a frame
            else:
                async with asyncio.timeout(5):
                    assert await reader.read() == b""  # the server hung up on us
                writer.close()
            await eventually(clock, lambda: any(e["event"] == expected_event for e in events(sink)))
            assert got[1:] == []  # nothing from the bad peer reached the RM
            hit = next(e for e in events(sink) if e["event"] == expected_event)
            if bad == "truncated":
                assert hit["truncated_bytes"] > 0
            # The good node is unaffected: still connected, still answered, in order.
            good.link.send(Heartbeat(machine_id=1, heartbeat_id=0, healthy=True, statuses=(), full=True))
            await eventually(clock, lambda: len(got) == 2)
            got[1][0].send(HeartbeatResponse(action="normal", heartbeat_id=1))
            await eventually(clock, lambda: len(good.got) == 1)
            assert not good.link.closed
            assert client.stats.reconnects == 0
            assert server.stats.bad_frames == (0 if bad == "truncated" else 1)
        finally:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
            await server.close()

    run(main, "realtime")


def test_backoff_grows_exponentially_up_to_its_cap() -> None:
    b = Backoff(initial_s=0.1, maximum_s=1.0, seed=3)
    delays = [b.next_delay() for _ in range(8)]
    for i, d in enumerate(delays):
        base = min(1.0, 0.1 * 2**i)
        assert 0.8 * base <= d <= 1.2 * base
    b.reset()
    assert b.next_delay() <= 0.12


def test_dropped_connection_reconnects_and_resyncs_keeping_running_containers() -> None:
    """A NodeManager with running containers loses its connection: the client reconnects after a
    backoff, the node re-registers with its full state under the same machine id, the RM keeps the
    containers (nothing requeued) and heartbeats resume."""

    async def main(clock: LoopClock) -> None:
        sink = io.StringIO()
        log = make_logger(clock, sink)
        rm = ResourceManager(clock, log, heartbeat_mode="periodic")
        rm.add_pool("p")
        server = TcpServer(rm.receive, log)
        host, port = await server.start("127.0.0.1", 0)
        stats = NodeCounters()
        node = NodeProcess("n1", Resources(8, 16), HeartbeatConfig(interval_s=1.0), clock, stats, log)
        client = TcpClient(host, port, clock, log, backoff=Backoff(initial_s=0.5, seed=1))
        client.connect(node)
        loop = asyncio.get_running_loop()
        rm.start()
        tasks = [loop.create_task(client.run())]
        try:
            async with asyncio.timeout(5):
                await client.wait_connected()
            node.start()
            rm.submit_operation(
                OperationSpec(name="long", pool="p", demand=Resources(2, 4), durations=[1e6] * 3, group="g")
            )
            await eventually(clock, lambda: len(node.running_containers()) == 3)
            machine_id = node.machine_id
            before = stats.heartbeat_responses

            for conn in list(server.connections):
                conn.abort()  # the network drops the connection
            await eventually(clock, lambda: client.stats.reconnects == 1)
            await eventually(clock, lambda: rm.counters().registrations == 2)
            await eventually(clock, lambda: stats.heartbeat_responses >= before + 3)

            assert node.state is NodeState.RUNNING
            assert node.machine_id == machine_id
            assert stats.resyncs == 1
            assert len(node.running_containers()) == 3
            assert rm.counters().tasks_requeued == 0 and rm.counters().nodes_lost == 0
            assert len(node_view(rm, machine_id).containers) == 3
            names = [e["event"] for e in events(sink)]
            assert "transport.reconnecting" in names and "node.reregistered" in names
        finally:
            node.stop()
            for t in tasks:
                t.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            await server.close()

    run(main, "realtime", speed=10)


def test_client_retries_until_the_rm_is_up() -> None:
    async def main(clock: LoopClock) -> None:
        sink = io.StringIO()
        log = make_logger(clock, sink)
        # Find a free port, then start the server there only after the client began trying.
        probe = TcpServer(lambda *_: None, log)
        host, port = await probe.start("127.0.0.1", 0)
        await probe.close()
        client = TcpClient(host, port, clock, log, backoff=Backoff(initial_s=0.05, seed=2))
        task = asyncio.get_running_loop().create_task(client.run())
        got: list[Any] = []
        server = TcpServer(lambda link, msg: got.append(msg), log)
        try:
            await eventually(clock, lambda: "transport.connect_failed" in sink.getvalue())
            await server.start(host, port)
            async with asyncio.timeout(5):
                await client.wait_connected()
            node = FakeNode()
            client.connect(node)
            node.link.send(Register(address="late", resources=Resources(8, 16)))
            await eventually(clock, lambda: len(got) == 1)
            assert msgspec.structs.asdict(got[0])["address"] == "late"
        finally:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
            await server.close()

    run(main, "realtime")
