"""Packing heuristics H(t, s): how well task demand D_t packs into node free resources F_s.

Lower is better for every function here (seed 000 eqs. 1.1, 1.3, 3.1, 3.3). Both vectors are
normalised first so that cores and GiB are comparable: each resource is divided by the cluster's
per-node mean (`node_mean`) or by the cluster total (`cluster_total`, what YT does). The two differ
by the same factor (the node count) on both resources, so `angle`, `angle_length` and `drfh` give
identical values under either; only `tetris` (a dot product) scales, by 1 / count².
"""

from __future__ import annotations

import math
from collections.abc import Callable

from rm.state.cluster import Cluster

# (demand cpu, demand ram, free cpu, free ram), all normalised -> value (lower packs better).
Heuristic = Callable[[float, float, float, float], float]


def angle(dc: float, dr: float, fc: float, fr: float) -> float:
    """1 - cos of the angle between D_t and F_s."""
    nd = math.hypot(dc, dr)
    nf = math.hypot(fc, fr)
    if nd == 0.0 or nf == 0.0:
        return 1.0
    return max(0.0, 1.0 - (dc * fc + dr * fr) / (nd * nf))


def angle_length(dc: float, dr: float, fc: float, fr: float) -> float:
    """H_angle · ‖F_s‖ / ‖D_t‖: a good angle counts for less when much stays free."""
    nd = math.hypot(dc, dr)
    nf = math.hypot(fc, fr)
    if nd == 0.0 or nf == 0.0:
        return 0.0 if nf == 0.0 else math.inf
    return max(0.0, 1.0 - (dc * fc + dr * fr) / (nd * nf)) * nf / nd


def drfh(dc: float, dr: float, fc: float, fr: float) -> float:
    """‖D_t/D_t1 - F_s/F_s1‖₁ (the first components cancel; the cpu one is the pivot)."""
    if dc <= 0.0 or fc <= 0.0:
        return math.inf
    return abs(dr / dc - fr / fc)


def tetris(dc: float, dr: float, fc: float, fr: float) -> float:
    """1 / <D_t, F_s> (Tetris maximises the dot product)."""
    dot = dc * fc + dr * fr
    return 1.0 / dot if dot > 0.0 else math.inf


HEURISTICS: dict[str, Heuristic] = {
    "angle": angle,
    "angle_length": angle_length,
    "drfh": drfh,
    "tetris": tetris,
}


def scales(cluster: Cluster, normalisation: str) -> tuple[float, float]:
    """Divisors (cpu, ram) that make the units comparable under ``normalisation``."""
    cpu, ram = cluster.cap_cpu, cluster.cap_ram
    if normalisation == "node_mean":
        count = sum(1 for n in cluster.nodes.values() if n.schedulable) or 1
        cpu, ram = cpu / count, ram / count
    return (cpu if cpu > 0 else 1.0, ram if ram > 0 else 1.0)
