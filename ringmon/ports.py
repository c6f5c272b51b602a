"""What a ring monitor needs from its environment besides the clock: a node<->node channel for
liveness, addressed by machine id. The harness provides it (in memory with seeded loss; a TCP
one can implement the same three methods)."""

from __future__ import annotations

from typing import Any, Protocol


class PeerReceiver(Protocol):
    def from_peer(self, msg: Any) -> None: ...


class PeerChannel(Protocol):
    def bind(self, machine_id: int, receiver: PeerReceiver) -> None:
        """Deliver messages addressed to ``machine_id`` to ``receiver`` from now on."""

    def unbind(self, machine_id: int, receiver: PeerReceiver) -> None:
        """Stop delivering to ``receiver`` (a no-op if the id was bound to someone else since)."""

    def send(self, dst: int, msg: Any) -> None:
        """Best effort: may be lost; never blocks and never re-enters the sender."""


class RingStats:
    """Counters shared by every monitor of one run (the emulator's totals)."""

    __slots__ = (
        "liveness_sent",
        "pings_sent",
        "reports_sent",
        "self_lag_skips",
        "sync_requests",
        "updates_applied",
        "updates_rejected",
        "updates_stale",
    )

    def __init__(self) -> None:
        self.liveness_sent = 0
        self.pings_sent = 0
        self.reports_sent = 0
        self.sync_requests = 0
        self.updates_applied = 0
        self.updates_rejected = 0
        self.updates_stale = 0
        self.self_lag_skips = 0

    @property
    def peer_messages(self) -> int:
        return self.liveness_sent + self.pings_sent
