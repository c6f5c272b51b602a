"""Refusal-based packing on top of DRF (seed 000 chapters 2–3, design.md §3).

A node's free resources are offered to operations in DRF fairness order (``candidates``). Each
operation's controller accepts or refuses by comparing how its task packs onto this node with the
offers it saw recently; on refusal the next operation gets the offer. ``assign`` returns the first
operation that accepts, so the manager's fill loop restarts the offers on the node's remaining
resources after every acceptance. If every candidate refuses, one task of the neediest (first)
candidate starts ignoring packing and the node's update ends there (§2.3): its remaining
resources are offered again at its next heartbeat. ``all_refused`` (the `fit` preset, ours) can
instead start the candidate whose task packs best on the node and go on offering it.
``share_band`` and ``below_level_refusals`` (the `fit-fair` preset, ours) keep users near DRF's level
L (the mean dominant share of the users with pending tasks): a refused offer passes down the fairness
order only to users at most (1 + band) L, and a user below L refuses only so many offers in a row.
With ``band_reference = "fair_share"`` each user is measured against its own DRF fair share instead
(progressive filling with its demand, refreshed as preemption refreshes it), since a user whose demand
keeps it below L is not owed L.
``ledger_cap`` bounds the share each user receives or gives out of turn
(rm/scheduler/policies/displacement.py).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from typing import ClassVar

import msgspec

from rm.ports import Clock
from rm.scheduler.config import SchedulerConfig
from rm.scheduler.fair_share import FairShares, progressive_filling
from rm.scheduler.policies.displacement import DisplacementLedger
from rm.scheduler.policies.drf import DRFPolicy, drf_key
from rm.scheduler.policies.heuristics import HEURISTICS, scales
from rm.scheduler.policies.packing_controller import PackingController
from rm.scheduler.policy import OfferCounts, PolicyCounters
from rm.state.cluster import EPS, Cluster, NodeRecord
from rm.state.operations import Operation, Pool


class PackingPolicy(DRFPolicy):
    # A needy operation's controller may refuse an offer (warm-up, a better fit seen), passing it on.
    honours_min_share: ClassVar[bool] = False

    def __init__(
        self, root: Pool, cluster: Cluster, config: SchedulerConfig, clock: Clock, counters: PolicyCounters,
        params: msgspec.Struct | None = None,
    ) -> None:
        super().__init__(root, cluster, config, clock, counters, params)
        self.params = config.packing.resolve()
        self._heuristic = HEURISTICS[self.params.heuristic]
        self._disabled_pools = frozenset(config.packing.disabled_pools)
        self._disabled_ops = frozenset(config.packing.disabled_operations)
        # Operations with packing on; the others accept every offer.
        self.controllers: dict[int, PackingController] = {}
        self._stopped: NodeRecord | None = None
        self._scale_key: tuple[float, float, int] = (-1.0, -1.0, -1)
        self._scale = (1.0, 1.0)
        self._fair: FairShares | None = None
        self._fair_at = -math.inf
        cap = self.params.ledger_cap
        self._ledger = None if cap is None else DisplacementLedger(cap, self.params.ledger_tau_s)

    def packing_enabled(self, op: Operation) -> bool:
        if op.group in self._disabled_ops or op.name in self._disabled_ops:
            return False
        return not any(p.name in self._disabled_pools for p in op.pools_up)

    def on_submitted(self, op: Operation) -> None:
        self._fair = None  # fair shares change with the operations there are
        self.counters.by_group.setdefault(op.group, OfferCounts())
        if self.packing_enabled(op):
            self.controllers[op.id] = PackingController(self.params)

    def on_finished(self, op: Operation) -> None:
        self._fair = None
        self.controllers.pop(op.id, None)

    def begin_fill(self, node: NodeRecord) -> None:
        self._stopped = None

    def _scales(self) -> tuple[float, float]:
        c = self.cluster
        key = (c.cap_cpu, c.cap_ram, len(c.nodes))
        if key != self._scale_key:
            self._scale_key = key
            self._scale = scales(c, self.params.normalisation)
        return self._scale

    def _share(self, e: Pool | Operation) -> float:
        """Dominant share / weight, as the root orders users."""
        c = self.cluster
        _, _, dom, _ = drf_key(e.usage_cpu, e.usage_ram, e.weight, 0.0, 0.0, c.cap_cpu, c.cap_ram)
        return dom

    def _user(self, op: Operation) -> Pool | Operation:
        """The user an operation belongs to: its top-level pool (the op itself if at the root)."""
        up = op.pools_up
        return up[-2] if len(up) >= 2 else op

    def _level(self) -> float:
        """The mean dominant share / weight of the users with pending tasks (DRF's water level)."""
        root = self.root
        users: list[Pool | Operation] = [p for p in root.children if p.pending_tasks > 0]
        users.extend(op for op in root.operations if op.pending)
        return sum(self._share(u) for u in users) / len(users) if users else 0.0

    def _fair_shares(self) -> FairShares:
        """DRF fair shares: recomputed when an operation comes or goes, and otherwise (demand changes
        as tasks start and end) every preemption check interval, as preemption refreshes them."""
        now = self.clock.now()
        if self._fair is None or now - self._fair_at >= self.config.preemption.check_interval_s:
            self._fair = progressive_filling(self.root, list(_operations(self.root)), self.cluster.capacity)
            self._fair_at = now
        return self._fair

    def _reference(self) -> Callable[[Pool | Operation], float]:
        """What a user's share / weight is held against: DRF's level, or its own fair share / weight."""
        if self.params.band_reference == "level":
            level = self._level()
            return lambda _user: level
        fair = self._fair_shares()

        def own(user: Pool | Operation) -> float:
            if isinstance(user, Pool):
                return fair.pools.get(user.name, 0.0) / user.weight
            return fair.operations.get(user.id, 0.0) / user.weight

        return own

    def assign(self, node: NodeRecord) -> Operation | None:
        if self._stopped is node:
            return None
        op, lead = self._assign(node)
        ledger = self._ledger
        if ledger is not None and op is not None and lead is not None:
            c = self.cluster
            d = op.demand
            share = drf_key(d.cpu, d.ram_gib, 1.0, 0.0, 0.0, c.cap_cpu, c.cap_ram)[2]  # task's dominant
            ledger.book(self._user(op), lead, share, self.clock.now())
        return op

    def _assign(self, node: NodeRecord) -> tuple[Operation | None, Pool | Operation | None]:
        now = self.clock.now()
        sc, sr = self._scales()
        fc, fr = node.free_cpu / sc, node.free_ram / sr
        heuristic = self._heuristic
        counters = self.counters
        by_group = counters.by_group
        neediest: Operation | None = None
        refusers: list[tuple[float, Operation]] = []
        band = self.params.share_band
        below = self.params.below_level_refusals
        ref = self._reference() if band is not None or below is not None else None
        in_order = True
        ledger = self._ledger
        lead: Pool | Operation | None = None
        for op in self.candidates(node):
            # share_band: past the first candidate (DRF's own choice) only users up to the ceiling.
            user = self._user(op)
            if (band is not None and ref is not None and not in_order
                    and self._share(user) > (1 + band) * ref(user) + EPS):
                continue
            if lead is None:
                lead = user
            elif ledger is not None and not ledger.may_receive(user, now):
                continue
            in_order = False
            ctrl = self.controllers.get(op.id)
            if ctrl is None:
                return op, lead
            d = op.demand
            value = heuristic(d.cpu / sc, d.ram_gib / sr, fc, fr)
            accepted = ctrl.decide(now, value)
            if (not accepted and below is not None and ref is not None
                    and ctrl.consecutive_refusals > below and self._share(user) < ref(user)):
                # A user below its reference refuses at most `below` in a row: a forced acceptance.
                ctrl.overrule()
                accepted = True
            if not accepted and ledger is not None and not ledger.may_refuse(user, now):
                ctrl.overrule()
                accepted = True
            counts = by_group[op.group]
            counts.offers += 1
            if accepted:
                counts.accepted += 1
                return op, lead
            counts.refused += 1
            counters.refusals += 1
            if neediest is None:
                neediest = op
            refusers.append((value, op))
        rule = self.params.all_refused
        if rule == "best_continue" and refusers:
            first = refusers[: max(1, math.ceil(self.params.fallback_fraction * len(refusers)))]
            neediest = min(first, key=lambda vo: vo[0])[1]  # the neediest among equals
        if neediest is not None:
            # Everyone refused: the neediest (or best-packing) starts one task anyway, and by
            # default this update ends.
            # (The `yt` preset's extra fairness-ordered pass over the refusers ignoring packing
            # picks the same operation here: nothing but packing makes an operation refuse.)
            # It is recorded as the neediest accepting (forced), not refusing.
            self.controllers[neediest.id].overrule()
            counts = by_group[neediest.group]
            counts.refused -= 1
            counts.accepted += 1
            counters.refusals -= 1
            counters.fallback_allocations += 1
            if rule == "neediest_stop":
                self._stopped = node
        return neediest, lead


def _operations(pool: Pool) -> Iterator[Operation]:
    yield from pool.operations
    for child in pool.children:
        yield from _operations(child)
