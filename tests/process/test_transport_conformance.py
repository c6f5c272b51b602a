"""One conformance suite, run over every transport: the RM and NodeManagers must not be able to
tell the in-memory transport from TCP (FIFO per link, answers reach the right node, send never
re-enters the receiver, closing either end closes both, other links unaffected)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import msgspec
import pytest

from emulator.harness.eventlog import make_logger
from emulator.time.clock import LoopClock, run
from emulator.transport.memory import MemoryNetwork
from emulator.transport.tcp import TcpClient, TcpServer
from ringmon.protocol import Ring, RingUpdate, UnlivelinessReport, UnlivelinessResponse
from rm.protocol import (
    ContainerLaunch,
    ContainerStatus,
    Disconnected,
    Heartbeat,
    HeartbeatResponse,
    KillContainers,
    LaunchContainers,
    Register,
    RegisterResponse,
    Resources,
)


class FakeRM:
    def __init__(self) -> None:
        self.got: list[tuple[Any, Any]] = []

    def receive(self, link: Any, msg: Any) -> None:
        self.got.append((link, msg))

    def links(self) -> list[Any]:
        seen: list[Any] = []
        for link, _ in self.got:
            if all(link is not s for s in seen):
                seen.append(link)
        return seen


class FakeNode:
    def __init__(self) -> None:
        self.got: list[Any] = []
        self.link: Any = None

    def attach(self, link: Any) -> None:
        self.link = link

    def receive(self, msg: Any) -> None:
        self.got.append(msg)

    def resync(self) -> None:
        pass


class Net:
    """Connects FakeNodes to a FakeRM over one transport kind."""

    def __init__(self, kind: str, clock: LoopClock, rm: FakeRM) -> None:
        self.kind = kind
        self.clock = clock
        self.rm = rm
        self._memory = MemoryNetwork(clock, rm.receive)
        self._server: TcpServer | None = None
        self._clients: list[tuple[TcpClient, asyncio.Task[None]]] = []

    async def connect(self, node: FakeNode) -> Any:
        if self.kind == "memory":
            self._memory.connect(node)
            return node.link
        log = make_logger(self.clock, None)
        if self._server is None:
            # The recording RM admits nobody: lift the budget of frames before a registration.
            self._server = TcpServer(self.rm.receive, log, admission_frames=1 << 30)
            await self._server.start("127.0.0.1", 0)
        host, port = self._server.address
        client = TcpClient(host, port, self.clock, log)
        task = asyncio.get_running_loop().create_task(client.run())
        self._clients.append((client, task))
        async with asyncio.timeout(5):
            await client.wait_connected()
        client.connect(node)
        return node.link

    async def close(self) -> None:
        for _, task in self._clients:
            task.cancel()
        await asyncio.gather(*(t for _, t in self._clients), return_exceptions=True)
        if self._server is not None:
            await self._server.close()


async def eventually(clock: LoopClock, cond: Callable[[], bool], timeout_s: float = 5.0) -> None:
    async with asyncio.timeout(timeout_s):
        while not cond():
            await clock.sleep(0.002)


def drive(kind: str, body: Callable[[Net, LoopClock], Awaitable[None]]) -> None:
    async def main(clock: LoopClock) -> None:
        net = Net(kind, clock, FakeRM())
        try:
            await body(net, clock)
        finally:
            await net.close()

    run(main, "realtime")


TRANSPORTS = ["memory", "tcp"]


def _heartbeat(i: int) -> Heartbeat:
    return Heartbeat(
        machine_id=7, heartbeat_id=i, healthy=i % 2 == 0,
        statuses=tuple(ContainerStatus(c, "running") for c in range(i % 5)), full=True,
    )


@pytest.mark.parametrize("kind", TRANSPORTS)
def test_node_messages_reach_the_rm_in_order_and_intact(kind: str) -> None:
    sent: list[Any] = [
        Register(address="n1", resources=Resources(8, 16), credentials="s",
                 containers=(ContainerStatus(3, "complete", -100),)),
        *(_heartbeat(i) for i in range(300)),
        UnlivelinessReport(reporter=2, suspect=1, ring_version=4),
    ]

    async def body(net: Net, clock: LoopClock) -> None:
        node = FakeNode()
        link = await net.connect(node)
        for msg in sent:
            link.send(msg)
        await eventually(clock, lambda: len(net.rm.got) == len(sent))
        # Over TCP the secret is proved by the connection, never sent: the Register arrives without.
        expected = sent if kind == "memory" else [msgspec.structs.replace(sent[0], credentials=""), *sent[1:]]
        assert [m for _, m in net.rm.got] == expected
        assert len(net.rm.links()) == 1

    drive(kind, body)


@pytest.mark.parametrize("kind", TRANSPORTS)
def test_rm_answers_reach_only_the_node_that_asked_in_order(kind: str) -> None:
    def answers(i: int) -> list[Any]:
        launch = ContainerLaunch(10 + i, Resources(1, 2), 30.5)
        return [
            RegisterResponse(action="normal", machine_id=i, ring=Ring(version=1, ids=(1, 2))),
            HeartbeatResponse(action="normal", heartbeat_id=1, launch=(launch,), kill=(5,)),
            LaunchContainers(containers=(launch,)),
            KillContainers(container_ids=(10 + i,)),
            RingUpdate(ring=Ring(version=2, ids=(1, 2, 3))),
            UnlivelinessResponse(action="resync", ring=None),
        ]

    async def body(net: Net, clock: LoopClock) -> None:
        nodes = [FakeNode(), FakeNode()]
        for i, node in enumerate(nodes):
            link = await net.connect(node)
            link.send(Register(address=f"n{i}", resources=Resources(8, 16)))
        await eventually(clock, lambda: len(net.rm.got) == 2)
        for link, msg in net.rm.got:
            i = int(msg.address[1:])
            for answer in answers(i):
                link.send(answer)
        await eventually(clock, lambda: all(len(n.got) == 6 for n in nodes))
        await clock.sleep(0.02)  # nothing else arrives
        for i, node in enumerate(nodes):
            assert node.got == answers(i)

    drive(kind, body)


@pytest.mark.parametrize("kind", TRANSPORTS)
def test_send_returns_before_the_receiver_runs(kind: str) -> None:
    """In both directions: what a receiver does with a message never runs inside ``send``."""

    async def body(net: Net, clock: LoopClock) -> None:
        node = FakeNode()
        link = await net.connect(node)
        link.send(Register(address="n", resources=Resources(8, 16)))
        assert net.rm.got == []  # node -> RM: delivered later, from the event loop
        await eventually(clock, lambda: len(net.rm.got) == 1)
        rm_link = net.rm.got[0][0]
        rm_link.send(HeartbeatResponse(action="normal", heartbeat_id=1))
        assert node.got == []  # RM -> node: likewise
        await eventually(clock, lambda: len(node.got) == 1)

    drive(kind, body)


@pytest.mark.parametrize("kind", TRANSPORTS)
@pytest.mark.parametrize("side", ["node", "rm"])
def test_closing_either_end_closes_both_and_spares_other_links(kind: str, side: str) -> None:
    async def body(net: Net, clock: LoopClock) -> None:
        a, b = FakeNode(), FakeNode()
        link_a = await net.connect(a)
        link_b = await net.connect(b)
        link_a.send(Register(address="a", resources=Resources(8, 16)))
        link_b.send(Register(address="b", resources=Resources(8, 16)))
        await eventually(clock, lambda: len(net.rm.got) == 2)
        rm_links = {m.address: link for link, m in net.rm.got}
        closing = link_a if side == "node" else rm_links["a"]
        closing.close()
        assert closing.closed
        await eventually(clock, lambda: link_a.closed and rm_links["a"].closed)
        # Sends on a closed link are dropped quietly, in both directions.
        link_a.send(_heartbeat(0))
        rm_links["a"].send(HeartbeatResponse(action="normal", heartbeat_id=1))
        # The other node's link works as before.
        link_b.send(_heartbeat(1))
        rm_links["b"].send(HeartbeatResponse(action="normal", heartbeat_id=2))
        await eventually(clock, lambda: len(b.got) == 1 and _heartbeat(1) in [m for _, m in net.rm.got])
        await clock.sleep(0.02)
        # The RM hears that a node's end closed (not when it closed the link itself).
        news = [m for _, m in net.rm.got][2:]
        expected = [_heartbeat(1)] + ([Disconnected()] if side == "node" else [])
        assert sorted(news, key=repr) == sorted(expected, key=repr)
        assert all(link is rm_links["a"] for link, m in net.rm.got if isinstance(m, Disconnected))
        assert a.got == []
        assert not link_b.closed and not rm_links["b"].closed

    drive(kind, body)
