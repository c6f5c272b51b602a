"""What a ring monitor needs from its environment: a clock with timers, a node<->node channel for
liveness (addressed by machine id, plus the endpoint of its process when nodes live in several),
a logger. The harness provides them (in memory with seeded loss, or over TCP between
node-hosting processes)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

import msgspec


class Timer(Protocol):
    def cancel(self) -> None: ...


class Clock(Protocol):
    def now(self) -> float: ...

    def call_later(self, delay: float, callback: Callable[..., object], *args: Any) -> Timer: ...


class Log(Protocol):
    def info(self, event: str, **fields: Any) -> Any: ...

    def warning(self, event: str, **fields: Any) -> Any: ...


class PeerReceiver(Protocol):
    def from_peer(self, msg: Any) -> None: ...

    def heard_from(self, sender: int, ring_version: int) -> bool:
        """``sender`` sent a liveness now (not stalled, advertising ``ring_version``): record it as
        a timestamp if that is all the message would do; False: it must come as a message."""

    def sender_stopped(self, sender: int, last_s: float) -> None:
        """``sender``, whose liveness came as timestamps, sends no more to us (it left, or we are
        no longer its successor): its silence counts from ``last_s``, its last tick."""

    def liveness_lossy(self) -> None:
        """Liveness may be lost from now on (injected loss): no timestamp vouches for a
        predecessor of ours, nor for us to a successor, any more."""


class PeerChannel(Protocol):
    def bind(self, machine_id: int, receiver: PeerReceiver) -> None:
        """Deliver messages addressed to ``machine_id`` to ``receiver`` from now on."""

    def unbind(self, machine_id: int, receiver: PeerReceiver) -> None:
        """Stop delivering to ``receiver`` (a no-op if the id was bound to someone else since)."""

    def send(self, dst: int, msg: Any, endpoint: str = "") -> None:
        """Best effort: may be lost; never blocks and never re-enters the sender. ``endpoint``:
        where ``dst``'s process listens, when the sender's ring says ("" if it does not)."""

    def touch(self, dst: int, sender: int, ring_version: int) -> bool:
        """Liveness at the cost of a timestamp: when nothing can lose, delay or hold a liveness
        to ``dst`` (one process, no fault), write it on ``dst``'s watcher and return True;
        otherwise return False and the sender sends the message."""

    def stopped(self, dst: int, sender: int, last_s: float) -> None:
        """``sender`` will send ``dst`` no more liveness (it left, or its ring changed; ``last_s``:
        its last tick). A timestamp ``touch`` accepted is a promise: until this call (or injected
        loss, ``PeerReceiver.liveness_lossy``) the watcher may take ``sender`` as heard on every
        tick, so neither side needs a timer or a message for it (kring). The call tells the
        watcher (``PeerReceiver.sender_stopped``)."""


class RingCounters(msgspec.Struct):
    """Counters shared by every monitor of one process (a run's or a worker's totals)."""

    liveness_sent: int = 0
    pings_sent: int = 0
    new_pred_pings: int = 0  # of pings_sent: to a predecessor a ring change just gave us
    reports_sent: int = 0
    sync_requests: int = 0
    updates_applied: int = 0
    updates_rejected: int = 0
    updates_stale: int = 0
    self_lag_skips: int = 0

    @property
    def peer_messages(self) -> int:
        return self.liveness_sent + self.pings_sent
