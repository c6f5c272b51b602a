"""An operation controller's accept/refuse rule for offered nodes (seed 000 §3.2–3.4).

The controller sees offers as samples of a random variable that is stable for long stretches. It
refuses the first ``s`` offers to gather statistics, then keeps a window of the last ``n`` offers
(none older than ``max_age``) and accepts an offer iff at most ``k`` window offers are
significantly better than it. Without the significance test and with i.i.d. offers, that is the
chance of ranking among the best k+1 of n+1 samples: (k+1)/(n+1).

Only offers on nodes where the operation could really run are fed in (the caller's duty), and
every such offer is recorded, accepted or refused.
"""

from __future__ import annotations

from collections import deque

from rm.scheduler.config import PackingParams


class PackingController:
    """Per-operation offer statistics and the decision over them."""

    __slots__ = (
        "_at_most",
        "_limit",
        "_p",
        "_window",
        "accepted",
        "consecutive_refusals",
        "forced",
        "offers",
        "refused",
    )

    def __init__(self, params: PackingParams) -> None:
        self._p = params
        self._at_most = params.accept == "at_most_k"
        self._limit = params.max_consecutive_refusals
        # (time, heuristic value) of recent offers, oldest first.
        self._window: deque[tuple[float, float]] = deque(maxlen=params.window)
        self.offers = 0
        self.accepted = 0
        self.refused = 0
        self.consecutive_refusals = 0
        # Acceptances forced by the consecutive-refusal limit.
        self.forced = 0

    def better_count(self, now: float, value: float) -> int:
        """How many window offers (not older than max_age) beat ``value``."""
        p = self._p
        oldest = now - p.max_age_s
        window = self._window
        while window and window[0][0] < oldest:
            window.popleft()
        if p.significance:
            absolute = value - p.A
            relative = value / p.R
            return sum(1 for _, old in window if old < absolute and old < relative)
        return sum(1 for _, old in window if old < value)

    def decide(self, now: float, value: float) -> bool:
        """Accept (True) or refuse the offer whose heuristic value is ``value``, and record it."""
        p = self._p
        better = self.better_count(now, value)
        if self._limit is not None and self.consecutive_refusals >= self._limit:
            accept = True
            self.forced += 1
        elif self.offers < p.warmup_refusals:
            accept = False
        else:
            accept = better <= p.k if self._at_most else better < p.k
        self._window.append((now, value))
        self.offers += 1
        if accept:
            self.accepted += 1
            self.consecutive_refusals = 0
        else:
            self.refused += 1
            self.consecutive_refusals += 1
        return accept

    def overrule(self) -> None:
        """The scheduler started a task on the offer just refused (everyone refused it): it counts
        as a forced acceptance, and the run of refusals ends. The offer stays in the window."""
        self.refused -= 1
        self.accepted += 1
        self.forced += 1
        self.consecutive_refusals = 0
