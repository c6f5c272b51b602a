"""A node-hosting process's side of the TCP transport: one connection carries the channels of all
its NodeManagers; if the connection drops, the client reconnects with exponential backoff and
every node re-registers with its full state (resync)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any, Protocol

import msgspec

from emulator.time.clock import LoopClock
from emulator.transport import auth
from emulator.transport.answers import cut_around_id
from emulator.transport.backoff import Backoff
from emulator.transport.connection import (
    NODE_HOST_DELIVERY_BATCH,
    FramedConnection,
    TcpLink,
    TransportStats,
)
from emulator.transport.framing import DEFAULT_MAX_FRAME_BYTES, FrameTooLarge
from rm.protocol import Heartbeat, NodeInbound, Register


class DeliveryClock(Protocol):
    """A clock that can be read once for a batch of deliveries (``emulator.time.wheel.WheelClock``)."""

    def hold(self) -> None: ...

    def release(self) -> None: ...


# Answers delivered between two clock readings within one batch.
_REREAD = 64


class AnswerPass(Protocol):
    """Delivers a read's frames in one pass, taking some answers itself (a node host's
    ``emulator.harness.answerpass.AnswerPass``)."""

    def hosted(self, node: Any) -> Any:
        """What the pass keeps for a channel opened for ``node`` (None: nothing, the usual way)."""

    def __call__(self, conn: Any, frames: list[tuple[int, Any]], hosted: dict[int, Any],
                 receivers: dict[int, Callable[[Any], None]]) -> bool:
        """Deliver ``frames`` (``hosted``: what ``hosted`` returned, by channel); True if a node
        got one."""

class _NodeLink(TcpLink):
    """A node's channel: what a node says is sent, but never its secret."""

    __slots__ = ("_wires",)

    def __init__(self, conn: FramedConnection, channel: int) -> None:
        super().__init__(conn, channel)
        self._wires: list[ReportWire] = []  # told when the channel closes

    def send(self, msg: Any) -> None:
        if not self.closed:
            if type(msg) is Register and msg.credentials:
                # The secret is proved (``TcpClient.secret``), never sent, whatever the node says.
                msg = msgspec.structs.replace(msg, credentials="")
            self._conn.send(self.channel, msg)

    def report_sender(self) -> ReportWire:
        """How this channel's node sends its full (periodic, no usage) reports: from saved pieces
        while nothing in them changed."""
        conn = self._conn
        assert isinstance(conn, _ClientConnection)
        wire = ReportWire(conn, self, conn.encode)
        wire.closed = self.closed
        self._wires.append(wire)
        return wire

    def lost(self) -> None:  # closed at either end (``close`` comes here too)
        super().lost()
        for wire in self._wires:
            wire.closed = True


class ReportWire:
    """A node's full reports on its channel: ``send(hb)`` is ``link.send(hb)`` (the same bytes),
    but encoded whole only when its health or id changed since the node's last report; the rest
    of it is the heartbeat id. The last report is kept as bytes cut around its id (``head``,
    ``tail``) with what it was made of (by identity), and its tail cut again around its statuses
    (``before``, ``after``): when only the statuses changed (a container came or went, an answer
    retired a completion: the churn of a loaded cluster), only they are encoded, between the
    saved pieces, not the whole report cut around its id again. An object with a method, not a
    partial: a node calls it every interval. It is the only object of the node's channel a report
    touches (``closed``: the link's, kept by the link): thousands of nodes' objects do not stay
    in the CPU's caches from one interval to the next."""

    __slots__ = ("_channel", "_conn", "_encode", "after", "before", "closed", "head", "healthy",
                 "machine_id", "statuses", "tail")

    def __init__(self, conn: _ClientConnection, link: TcpLink, encode: Callable[[Any], bytes]) -> None:
        self._conn = conn
        self._channel = link.channel
        self._encode = encode
        self.closed = False
        self.statuses: Any = None
        self.healthy = False
        self.machine_id = -1
        self.head = b""
        self.tail = b""
        # The tail around its statuses (None: not cut so, e.g. a report with usage).
        self.before: bytes | None = None
        self.after = b""

    def send(self, hb: Heartbeat) -> None:
        if self.closed:
            return
        number = self._encode(hb.heartbeat_id)
        if (
            hb.statuses is not self.statuses or hb.healthy is not self.healthy
            or hb.machine_id != self.machine_id
        ) and not self._saved(hb, number):
            return  # sent the usual way
        self._conn.send_report(self._channel, hb, self.head, number, self.tail)

    def _saved(self, hb: Heartbeat, number: bytes) -> bool:
        """Save ``hb``'s pieces: its statuses alone encoded between the saved pieces when only
        they changed, else all of it cut again (``_cut``); False if it went the usual way."""
        before = self.before
        if (
            before is not None and hb.statuses is not self.statuses and hb.healthy is self.healthy
            and hb.machine_id == self.machine_id and hb.full and not hb.usage
        ):
            tail = before + self._encode(hb.statuses) + self.after
            if len(self.head) + len(number) + len(tail) <= self._conn.max_frame_bytes:
                self.tail = tail
                self.statuses = hb.statuses
                return True
        return self._cut(hb, number)

    def _cut(self, hb: Heartbeat, number: bytes) -> bool:
        """``hb`` encoded whole and cut around its id (and its tail around its statuses), or, for
        a report too large, sent the usual way (False; ``statuses`` None: nothing saved)."""
        body = self._encode(hb)
        pieces = cut_around_id(body, number) if len(body) <= self._conn.max_frame_bytes else None
        if pieces is None:
            self.statuses = None
            self.before = None
            self._conn.send(self._channel, hb)  # the usual way (it refuses a frame too large)
            return False
        self.head, self.tail = pieces[0], pieces[1]
        self.statuses, self.healthy, self.machine_id = hb.statuses, hb.healthy, hb.machine_id
        self.before = None
        if hb.full and not hb.usage:
            # The statuses are the last field before ``full`` (``usage``, empty, is left out): the
            # last place their bytes occur in the tail is theirs.
            encoded = self._encode(hb.statuses)
            at = self.tail.rfind(encoded)
            if at >= 0:
                self.before, self.after = self.tail[:at], self.tail[at + len(encoded) :]
        return True


class _ClientConnection(FramedConnection):
    yield_every = NODE_HOST_DELIVERY_BATCH

    def __init__(self, client: TcpClient) -> None:
        super().__init__(NodeInbound | auth.Challenge, client.max_frame_bytes, client.log, client.stats)
        # Each open channel's node, as the bound ``receive`` it gets its messages through.
        self._receivers: dict[int, Callable[[Any], None]] = {}
        self._next_channel = 1
        self._clock = client.delivery_clock
        self._pass = client.answers
        self._hosted: dict[int, Any] = {}  # by channel: what the pass keeps for its node
        self.encode = msgspec.msgpack.Encoder().encode  # one per connection, shared by its nodes' reports
        self._loop = asyncio.get_running_loop()
        self.challenged: asyncio.Future[bytes] = asyncio.get_running_loop().create_future()
        self.answered = False  # a frame came after the challenge: our proof passed

    def send_report(self, channel: int, msg: Any, head: bytes, middle: bytes, tail: bytes) -> None:
        """``send_encoded`` (and what it calls to count and flush) in one call: a node's report,
        every node, every interval. A node host sets no write-buffer limit (``_queued``'s check)."""
        if self.closed:
            return
        try:
            size = self._encoder.append_encoded(self._out, channel, msg, head, middle, tail)
        except FrameTooLarge as err:
            self._log.error("transport.frame_too_large", peer=self.peer, error=str(err), outgoing=True)
            return
        stats = self.stats
        stats.frames_out += 1
        stats.bytes_out += size
        if not self._flush_pending:  # the first frame of this loop pass: one write for them all
            self._flush_pending = True
            self._loop.call_soon(self._flush)

    def open(self, node: Any) -> _NodeLink:
        channel = self._next_channel
        self._next_channel += 1
        link = self.links[channel] = _NodeLink(self, channel)
        self._receivers[channel] = node.receive
        if self._pass is not None:
            hosted = self._pass.hosted(node)
            if hosted is not None:
                self._hosted[channel] = hosted
        return link

    def on_frames(self, frames: list[tuple[int, Any]]) -> None:
        # One pass over a read's answers: straight to each node, the clock read once per batch.
        receivers = self._receivers
        if self._pass is not None:
            if self._pass(self, frames, self._hosted, receivers):
                self.answered = True  # a node got a frame: our proof passed
            return
        clock = self._clock
        if clock is not None:
            clock.hold()
        reread = _REREAD
        delivered = False
        try:
            for channel, msg in frames:
                if self.closed:
                    return
                receive = receivers.get(channel)
                if receive is not None and msg is not None:
                    delivered = True
                    receive(msg)
                    reread -= 1
                    if not reread and clock is not None:
                        reread = _REREAD
                        clock.release()
                        clock.hold()
                else:
                    self.on_frame(channel, msg)
        finally:
            if delivered:
                self.answered = True  # a node got a frame: our proof passed
            if clock is not None:
                clock.release()

    def on_frame(self, channel: int, msg: Any) -> None:
        if msg is None:
            self._remote_close(channel)
            self._receivers.pop(channel, None)
            self._hosted.pop(channel, None)
            return
        if type(msg) is auth.Challenge:
            if not self.challenged.done():
                self.challenged.set_result(msg.nonce)
            return
        self.answered = True  # a frame for a channel closed meanwhile

    def close_channel(self, channel: int) -> None:
        super().close_channel(channel)
        self._receivers.pop(channel, None)
        self._hosted.pop(channel, None)


class TcpClient:
    """Connects a set of NodeManagers to the RM over one connection, reconnecting when it drops.

    ``connect(node)`` registers a node; while connected it gets a live link, after a reconnect a
    new one and a ``resync()`` call (it re-registers with its full state).
    """

    def __init__(
        self,
        host: str,
        port: int,
        clock: LoopClock,
        log: Any,
        max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES,
        backoff: Backoff | None = None,
        wrap: Callable[[TcpLink], Any] | None = None,
        secret: str = "",
        challenge_timeout_s: float = 10.0,
        delivery_clock: DeliveryClock | None = None,
        answers: AnswerPass | None = None,
    ) -> None:
        """``wrap(link)`` may decorate each node's link before the node gets it (message faults);
        ``secret``: proved to the RM when it challenges a new connection (nodes register only
        after that); if it does not within ``challenge_timeout_s`` (an RM with no secret), the
        nodes register unproved; ``delivery_clock``: read once per batch of answers delivered
        together (the nodes' clock); ``answers``: delivers each read's frames instead (it reads
        the clock itself)."""
        self.delivery_clock = delivery_clock
        self.answers = answers
        self.secret = secret
        self.challenge_timeout_s = challenge_timeout_s
        self.host = host
        self.port = port
        self.clock = clock
        self.log = log
        self.max_frame_bytes = max_frame_bytes
        self.backoff = backoff or Backoff()
        self._wrap = wrap
        self.stats = TransportStats()
        self._nodes: list[Any] = []
        self._conn: _ClientConnection | None = None
        self._connected = asyncio.Event()

    def connect(self, node: Any) -> TcpLink | None:
        self._nodes.append(node)
        if self._conn is not None and not self._conn.closed:
            link = self._conn.open(node)
            node.attach(self._wrapped(link))
            return link
        return None

    def _wrapped(self, link: TcpLink) -> Any:
        return link if self._wrap is None else self._wrap(link)

    async def wait_connected(self) -> None:
        await self._connected.wait()

    async def run(self) -> None:
        """Keep the connection up until cancelled."""
        loop = asyncio.get_running_loop()
        first = True
        try:
            while True:
                try:
                    async with asyncio.timeout(10):
                        _, conn = await loop.create_connection(
                            lambda: _ClientConnection(self), self.host, self.port
                        )
                except (OSError, TimeoutError) as err:
                    delay = self.backoff.next_delay()
                    self.log.warning("transport.connect_failed", host=self.host, port=self.port,
                                     error=str(err), retry_in_s=round(delay, 3))
                    await self.clock.sleep(delay)
                    continue
                assert isinstance(conn, _ClientConnection)
                if self.secret:
                    try:
                        await self._prove(conn)
                    except BaseException:  # cancelled while waiting: the connection goes too
                        conn.close()
                        raise
                    if conn.closed:
                        continue  # lost before the proof: the next try, after the backoff
                self._conn = conn
                self.backoff.reset()
                for node in self._nodes:
                    node.attach(self._wrapped(conn.open(node)))
                    if not first:
                        node.resync()
                if not first:
                    self.stats.reconnects += 1
                    self.log.info("transport.reconnected", host=self.host, port=self.port,
                                  nodes=len(self._nodes))
                first = False
                self._connected.set()
                await conn.lost
                self._connected.clear()
                if conn.challenged.done() and not conn.answered:
                    # Closed after our proof, before any answer: the RM's secret is not ours.
                    self.stats.proofs_refused += 1
                    self.log.warning("transport.proof_refused", host=self.host, port=self.port)
                delay = self.backoff.next_delay()
                self.log.warning("transport.reconnecting", host=self.host, port=self.port,
                                 retry_in_s=round(delay, 3))
                await self.clock.sleep(delay)
        finally:
            if self._conn is not None:
                self._conn.close()

    async def _prove(self, conn: _ClientConnection) -> None:
        waits: list[asyncio.Future[Any]] = [conn.challenged, conn.lost]
        await asyncio.wait(waits, timeout=self.challenge_timeout_s, return_when=asyncio.FIRST_COMPLETED)
        if conn.challenged.done():
            conn.send(0, auth.prove(self.secret, conn.challenged.result(), auth.RM))
        elif not conn.closed:
            self.log.warning("transport.no_challenge", host=self.host, port=self.port,
                             waited_s=self.challenge_timeout_s)
        else:
            await self.clock.sleep(self.backoff.next_delay())

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
