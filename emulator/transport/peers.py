"""In-memory node<->node channel for ring liveness, with seeded message loss.

Implements ``ringmon.ports.PeerChannel``: messages are addressed by machine id and delivered
through the event loop (never re-entering the sender), after the transport latency. A fraction
of them is dropped, decided by one seeded RNG, so a run stays a function of its seed.
"""

from __future__ import annotations

import random
from typing import Any

import msgspec

from emulator.time.clock import Scheduler
from ringmon.ports import PeerReceiver


class PeerCounters(msgspec.Struct):
    sent: int = 0
    lost: int = 0  # dropped by an injected liveness loss
    undeliverable: int = 0  # no receiver, no endpoint, or no connection to it
    rejected: int = 0  # peer connections closed for a bad hello (TCP)


class PeerBindings:
    """What every peer channel shares: who receives an id's messages, and the seeded injected loss."""

    def __init__(self, seed: int) -> None:
        self._rng = random.Random(f"{seed}:peers")
        # Binders per id, latest last (ids are reused: the smallest free one goes to a new node).
        self._bound: dict[int, list[PeerReceiver]] = {}
        self.loss = 0.0
        self.counters = PeerCounters()

    def set_loss(self, fraction: float) -> None:
        if not 0.0 <= fraction <= 1.0:
            raise ValueError(f"loss fraction must be in [0, 1], got {fraction}")
        if fraction > 0.0 and self.loss == 0.0:
            for stack in list(self._bound.values()):
                for receiver in stack:
                    receiver.liveness_lossy()
        self.loss = fraction

    def bind(self, machine_id: int, receiver: PeerReceiver) -> None:
        self._bound.setdefault(machine_id, []).append(receiver)

    def unbind(self, machine_id: int, receiver: PeerReceiver) -> None:
        # A stale claimant (a node acting on a registration answer the RM has since revoked, and
        # whose id went to another node) leaving must not cut off the id's current owner.
        stack = self._bound.get(machine_id)
        if stack is not None and receiver in stack:
            stack.remove(receiver)
            if not stack:
                del self._bound[machine_id]

    def receiver(self, machine_id: int) -> PeerReceiver | None:
        """Who gets messages for ``machine_id``: the latest of its binders still bound."""
        stack = self._bound.get(machine_id)
        return stack[-1] if stack else None

    def stopped(self, dst: int, sender: int, last_s: float) -> None:
        # Only a receiver of this process can have taken timestamps from the sender.
        receiver = self.receiver(dst)
        if receiver is not None:
            receiver.sender_stopped(sender, last_s)

    def _hand_over(self, dst: int, msg: Any) -> None:
        # Resolved at delivery: a message to an id whose owner crashed goes nowhere.
        receiver = self.receiver(dst)
        if receiver is None:
            self.counters.undeliverable += 1
            return
        receiver.from_peer(msg)

    def _sent_and_kept(self) -> bool:
        """Counts a send; False when the injected loss drops it (one seeded draw per send)."""
        self.counters.sent += 1
        if self.loss > 0.0 and self._rng.random() < self.loss:
            self.counters.lost += 1
            return False
        return True


class MemoryPeers(PeerBindings):
    def __init__(self, clock: Scheduler, seed: int, latency_s: float = 0.0, timestamps: bool = True) -> None:
        """``timestamps``: liveness no fault touches is a timestamp written on the watcher
        (``touch``) rather than a message delivered through the event loop."""
        super().__init__(seed)
        self._clock = clock
        self._latency = latency_s
        self._timestamps = timestamps and latency_s == 0.0
        # One callback object, so that back-to-back sends share one loop entry.
        self._deliver_now = self._deliver

    def send(self, dst: int, msg: Any, endpoint: str = "") -> None:
        if not self._sent_and_kept():
            return
        if self._latency > 0:
            self._clock.call_later(self._latency, self._deliver, (dst, msg))
        else:
            self._clock.call_soon_batched(self._deliver_now, (dst, msg))

    def touch(self, dst: int, sender: int, ring_version: int) -> bool:
        if not self._timestamps or self.loss > 0.0:
            return False
        receiver = self.receiver(dst)
        if receiver is not None and not receiver.heard_from(sender, ring_version):
            return False
        self.counters.sent += 1
        if receiver is None:
            self.counters.undeliverable += 1
        return True

    def _deliver(self, item: tuple[int, Any]) -> None:
        self._hand_over(*item)
