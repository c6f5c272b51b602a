"""Tetris baseline (seed 000 §1.5): fairness order, then the best packer among its head.

On every offer the operations are sorted by DRF; among the first ``(1 - f)`` fraction of that
list (at least one) the one whose task maximises ``<D_t, F_s>`` starts. ``f = 1`` is plain DRF,
``f = 0`` ignores fairness entirely. Vectors are normalised by cluster totals (the choice is the
same under the per-node mean, which differs by one common factor).
"""

from __future__ import annotations

import math
from typing import ClassVar

from rm.scheduler.policies.drf import DRFPolicy
from rm.scheduler.policies.heuristics import scales, tetris
from rm.state.cluster import NodeRecord
from rm.state.operations import Operation


class TetrisPolicy(DRFPolicy):
    # The best packer among the head of the fairness order may be a sibling above its min share.
    honours_min_share: ClassVar[bool] = False

    def assign(self, node: NodeRecord) -> Operation | None:
        ops = list(self.candidates(node))
        if len(ops) <= 1:
            return ops[0] if ops else None
        head = ops[: max(1, math.ceil((1.0 - self.config.tetris_f) * len(ops) - 1e-9))]
        sc, sr = scales(self.cluster, "cluster_total")
        fc, fr = node.free_cpu / sc, node.free_ram / sr
        # min() keeps the fairer operation on ties.
        return min(head, key=lambda op: tetris(op.demand.cpu / sc, op.demand.ram_gib / sr, fc, fr))
