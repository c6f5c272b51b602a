"""Who packing moved share to, per user (the `ledger_cap` packing option, docs/packing.md).

A task started on a node whose first candidate (DRF's choice) was another user moves the task's
dominant share from that user (the giver) to the receiver. Per user the ledger keeps the net share
received out of turn and the share of every task started, both decaying with time constant tau;
a user whose net received share is over cap x its started share gets no more offers out of turn,
and one whose net given share is over it refuses no more.
"""

from __future__ import annotations

import math
from collections.abc import Hashable


class DisplacementLedger:
    def __init__(self, cap: float, tau_s: float) -> None:
        self._cap = cap
        self._tau = tau_s
        # user -> [net share received out of turn, share started, time of the last decay]
        self._entries: dict[Hashable, list[float]] = {}

    def _entry(self, user: Hashable, now: float) -> list[float]:
        entry = self._entries.get(user)
        if entry is None:
            entry = self._entries[user] = [0.0, 0.0, now]
        elif entry[2] != now:
            f = math.exp((entry[2] - now) / self._tau)
            entry[0] *= f
            entry[1] *= f
            entry[2] = now
        return entry

    def book(self, receiver: Hashable, lead: Hashable, share: float, now: float) -> None:
        """``receiver`` started a task of dominant share ``share`` where ``lead`` came first."""
        entry = self._entry(receiver, now)
        entry[1] += share
        if receiver is not lead:
            entry[0] += share
            self._entry(lead, now)[0] -= share

    def may_receive(self, user: Hashable, now: float) -> bool:
        """May ``user`` get an offer out of turn (its net received share within the cap)?"""
        net, started, _ = self._entry(user, now)
        return net <= self._cap * started

    def may_refuse(self, user: Hashable, now: float) -> bool:
        """May ``user`` refuse an offer (its net given share within the cap)?"""
        net, started, _ = self._entry(user, now)
        return -net <= self._cap * started
