"""Round-trip time and loss estimates for the failure detector's timeouts.

A timeout shorter than the round trip turns every answer into a silence: with 0.35 s of latency
each way and a 0.6 s probe timeout, every probe of a live node "expired" and the RM removed most
of a healthy cluster. The detector therefore waits its configured time *plus* the round-trip
timeout measured here (Jacobson/Karels, RFC 6298: SRTT + 4·RTTVAR), and sends more attempts when
the measured per-attempt loss makes "every attempt lost" plausible. On a network that answers at
once (the emulator's zero-latency runs) both stay exactly 0 and nothing changes.
"""

from __future__ import annotations

import math

# RFC 6298 gains.
ALPHA = 0.125
BETA = 0.25
# An alive node is taken for dead only if every attempt sent to it being lost is less likely than
# this (at the measured per-attempt loss). Per suspicion: a lossy hour has ~10^4 suspicions, so
# 1e-3 meant about one live node removed per 1,000 (measured: 1 in 1,366 at 50% probe loss).
LOSS_TARGET = 1e-6
# Loss evidence fades with this weight per new outcome (about the last 100 outcomes count).
LOSS_DECAY = 0.99


class RttEstimator:
    __slots__ = ("cap_s", "rttvar", "samples", "srtt")

    def __init__(self, cap_s: float = math.inf) -> None:
        """``cap_s``: the largest timeout it ever asks for (bounds detection latency)."""
        self.cap_s = cap_s
        self.srtt = 0.0
        self.rttvar = 0.0
        self.samples = 0

    def sample(self, rtt_s: float) -> None:
        r = max(0.0, rtt_s)
        if self.samples == 0:
            self.srtt, self.rttvar = r, r / 2
        else:
            self.rttvar = (1 - BETA) * self.rttvar + BETA * abs(self.srtt - r)
            self.srtt = (1 - ALPHA) * self.srtt + ALPHA * r
        self.samples += 1

    def timeout(self) -> float:
        """How long an answer may take (0 with no samples, or when every round trip was 0)."""
        return min(self.cap_s, self.srtt + 4 * self.rttvar)


class LossEstimator:
    """Per-attempt loss of probes to nodes that turned out alive (a decaying average)."""

    __slots__ = ("lost", "total")

    def __init__(self) -> None:
        self.lost = 0.0
        self.total = 0.0

    def outcome(self, lost: int, delivered: int) -> None:
        for _ in range(lost + delivered):
            self.lost *= LOSS_DECAY
            self.total *= LOSS_DECAY
        self.lost += lost
        self.total += lost + delivered

    def rate(self) -> float:
        return self.lost / self.total if self.total > 0 else 0.0

    def attempts_needed(self) -> int:
        """Attempts after which a live node's silence is less likely than ``LOSS_TARGET``."""
        p = self.rate()
        if p <= 0.0:
            return 1
        if p >= 0.95:
            return 270  # log(1e-6)/log(0.95): hopeless; the caller's cap on waiting decides
        return math.ceil(math.log(LOSS_TARGET) / math.log(p))
