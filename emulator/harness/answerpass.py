"""The RM's answers of one socket read in one pass over their hosted nodes (``AnswerPass``): the
common answer to a node whose process runs (launches or none) is taken field by field; every
other frame goes its usual way. Split from ``HostedNode`` (emulator/harness/hostednode.py), whose
fast path it repeats."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from emulator.harness.hostednode import HostedNode
from emulator.harness.hosttiming import BatchedTiming
from nodemanager.node import NodeState
from rm.protocol import HeartbeatResponse

_RUNNING = NodeState.RUNNING


class DeliveryClock(Protocol):
    """A clock read once for a batch of deliveries (``emulator.time.wheel.WheelClock``)."""

    def hold(self) -> None: ...

    def release(self) -> None: ...

    def now(self) -> float: ...


class AnswerPass:
    """The answers of one socket read in one pass over their nodes (``TcpClient(answers=...)``).

    The common answer to a hosted node whose process runs (action "normal", no kill, launches
    or none: ``receive_hosted``'s fast path) is taken here, field by field, with no call per
    node but its launches'; its timing goes straight into ``timing``'s pending list (the
    node's probe is that one's, checked when its channel opens: ``hosted``). Every other frame
    goes its usual way: the node's ``receive``, or the connection's ``on_frame``. The clock is
    read once per ``reread`` answers, as a wheel slot reads it."""

    __slots__ = ("_clock", "_pending", "_probe", "interval_s", "reread")

    def __init__(self, clock: DeliveryClock, timing: BatchedTiming, reread: int = 64) -> None:
        self._clock = clock
        self._probe = timing.answered
        self._pending = timing.answered_pending
        self.interval_s = timing.interval_s
        self.reread = reread

    def hosted(self, endpoint: object) -> HostedNode | None:
        """The hosted node this pass may answer itself for ``endpoint`` (what the connection
        opened a channel for), or None: its answers go the usual way."""
        node = getattr(endpoint, "node", None)
        if type(node) is not HostedNode or node._process is not endpoint or node._gate is None:
            return None
        timing = node._timing
        if timing is None or timing.answered != self._probe:
            return None
        return node

    def __call__(self, conn: AnswerSource, frames: list[tuple[int, Any]],
                 hosted: dict[int, HostedNode], receivers: dict[int, Callable[[Any], None]]) -> bool:
        """Deliver ``frames``; True if a node got one."""
        clock = self._clock
        clock.hold()
        now = clock.now()
        pending, interval = self._pending, self.interval_s
        reread = self.reread
        delivered = False
        try:
            for channel, msg in frames:
                if conn.closed:
                    break
                node = hosted.get(channel)
                if node is not None and type(msg) is HeartbeatResponse:
                    sent = node._inflight
                    if (
                        sent is not None
                        and msg.action == "normal"
                        and not msg.kill
                        # Running: so its process has not crashed (a crash stops the node).
                        and node.state is _RUNNING
                        and msg.heartbeat_id == sent.heartbeat_id + 1
                        and node._gate._held is None  # type: ignore[union-attr]
                    ):
                        delivered = True
                        node._stats.heartbeat_responses += 1
                        sent_at = node._inflight_at
                        if interval and now - sent_at <= interval:  # ``BatchedTiming.answered``
                            pending(sent_at)
                        node._inflight = None
                        node._last_response_id = msg.heartbeat_id
                        node._reported_healthy = sent.healthy
                        carried = node._inflight_changes
                        if carried:
                            node._retire(carried)
                        launches = msg.launch
                        if launches:  # as ``heartbeat_answered``: after the retired changes
                            for launch in launches:
                                node._launch(launch)
                        if node._tick_timer is None:
                            node._touch()
                        reread -= 1
                        if not reread:
                            reread = self.reread
                            clock.release()
                            clock.hold()
                            now = clock.now()
                        continue
                receive = receivers.get(channel)
                if receive is not None and msg is not None:
                    delivered = True
                    receive(msg)
                    reread -= 1
                    if not reread:
                        reread = self.reread
                        clock.release()
                        clock.hold()
                        now = clock.now()
                else:
                    conn.on_frame(channel, msg)
        finally:
            clock.release()
        return delivered


class AnswerSource(Protocol):
    """The connection an ``AnswerPass`` delivers for (``emulator.transport.client``)."""

    @property
    def closed(self) -> bool: ...

    def on_frame(self, channel: int, msg: Any) -> None: ...
