"""Real usage of a node's containers, distinct from what they requested (design.md §3b).

Each container with a usage model draws its CPU and RAM usage at every sample (the node's usage
timer, armed only while such containers run; seeded per task attempt, so a run is deterministic
on the virtual clock). At each sample the node:

- kills a container whose memory exceeds its hard limit (OOM);
- if its containers' memory exceeds the node's, kills the lowest-tier container (the largest
  user within a tier) until it fits again (OOM);
- throttles CPU: a container gets at most its CPU limit, and all of them at most the node's
  cores (proportionally); its work progresses at granted/used, so a throttled task runs longer.

Usage is piecewise constant between samples; the time integrals in ``UsageStats`` are the
ground truth the run's usage metrics come from.
"""

from __future__ import annotations

import math
import random

from nodemanager.stats import UsageStats
from rm.protocol import ContainerUsage, Resources, TaskUsage, UsageModel


class UsageProcess:
    """One resource's usage of one task, as a fraction of its request."""

    __slots__ = ("_level", "_model", "_next_switch", "_on", "_rng")

    def __init__(self, model: UsageModel, rng: random.Random, now: float) -> None:
        self._model = model
        self._rng = rng
        self._on = False
        self._next_switch = now + rng.expovariate(1.0 / model.off_s) if model.kind == "bursty" else 0.0
        self._level = 1.0
        if model.task_cv > 0:
            s2 = math.log1p(model.task_cv * model.task_cv)
            self._level = rng.lognormvariate(-s2 / 2, math.sqrt(s2))

    def draw(self, now: float) -> float:
        return self._level * self._draw(now)

    def _draw(self, now: float) -> float:
        m = self._model
        rng = self._rng
        if m.kind == "constant":
            return m.mean
        if m.kind == "normal":
            return max(0.0, rng.gauss(m.mean, m.cv * m.mean))
        if m.kind == "lognormal":
            s2 = math.log1p(m.cv * m.cv)
            return rng.lognormvariate(math.log(m.mean) - s2 / 2, math.sqrt(s2))
        while self._next_switch <= now:  # bursty: an on/off process
            self._on = not self._on
            self._next_switch += rng.expovariate(1.0 / (m.on_s if self._on else m.off_s))
        return m.peak if self._on else m.mean


def model_mean(model: UsageModel | None) -> float:
    """The long-run mean of a model, as a fraction of the request (1 without a model)."""
    if model is None:
        return 1.0
    if model.kind == "bursty":
        return (model.mean * model.off_s + model.peak * model.on_s) / (model.on_s + model.off_s)
    return model.mean


class Tracked:
    """A running container with a usage model."""

    __slots__ = (
        "cpu",
        "cpu_limit",
        "cpu_proc",
        "last_t",
        "ram",
        "ram_hard",
        "ram_limit",
        "ram_proc",
        "rate",
        "remaining_s",
        "reported",
        "request",
        "started_at",
        "tier",
        "work_s",
    )

    def __init__(self, request: Resources, usage: TaskUsage, work_s: float, now: float) -> None:
        rng = random.Random(usage.seed)
        self.request = request
        self.tier = usage.tier
        self.cpu_limit = usage.cpu_limit if usage.cpu_limit is not None else request.cpu
        self.ram_limit = usage.ram_limit_gib if usage.ram_limit_gib is not None else request.ram_gib
        self.ram_hard = usage.ram_hard
        self.cpu_proc = UsageProcess(usage.cpu, rng, now) if usage.cpu is not None else None
        self.ram_proc = UsageProcess(usage.ram, rng, now) if usage.ram is not None else None
        self.cpu = 0.0
        self.ram = 0.0
        self.draw(now)
        self.rate = 1.0
        self.work_s = work_s
        self.remaining_s = work_s
        self.started_at = now
        self.last_t = now
        self.reported: tuple[float, float] | None = None

    def draw(self, now: float) -> None:
        req = self.request
        self.cpu = req.cpu * (self.cpu_proc.draw(now) if self.cpu_proc is not None else 1.0)
        self.ram = req.ram_gib * (self.ram_proc.draw(now) if self.ram_proc is not None else 1.0)

    def report(self, cid: int) -> ContainerUsage:
        self.reported = (self.cpu, self.ram)
        return ContainerUsage(cid, round(self.cpu, 6), round(self.ram, 6))

    def moved(self, threshold: float) -> bool:
        """Usage moved by more than ``threshold`` of the request since last reported."""
        if self.reported is None:
            return True
        cpu, ram = self.reported
        return (abs(self.cpu - cpu) > threshold * self.request.cpu
                or abs(self.ram - ram) > threshold * self.request.ram_gib)


class SampleResult:
    __slots__ = ("moved", "ooms", "retime")

    def __init__(self) -> None:
        self.ooms: list[tuple[int, bool]] = []  # (container, over its own hard limit)
        self.retime: dict[int, float] = {}  # container -> seconds until it finishes
        self.moved: list[int] = []


class NodeUsage:
    """The usage-modelled containers of one node."""

    __slots__ = ("_capacity", "_stats", "_threshold", "containers", "dirty", "last_sample_t", "overflowing")

    def __init__(self, capacity: Resources, stats: UsageStats, threshold: float) -> None:
        self._capacity = capacity
        self._stats = stats
        self._threshold = threshold
        self.containers: dict[int, Tracked] = {}
        # Delta mode: containers whose usage moved enough to be reported in the next heartbeat.
        self.dirty: set[int] = set()
        self.last_sample_t = 0.0
        self.overflowing = False

    def add(self, cid: int, request: Resources, usage: TaskUsage, work_s: float, now: float) -> Tracked:
        if not self.containers:  # an idle stretch is no node-time, and nothing overflowed in it
            self.last_sample_t = now
            self.overflowing = False
        self._advance_node(now)
        # Throttling applies from the next sample on (rate 1 until then).
        t = self.containers[cid] = Tracked(request, usage, work_s, now)
        self._now(t, 1.0)
        return t

    def _now(self, t: Tracked, sign: float) -> None:
        st = self._stats
        st.cpu_now += sign * t.cpu
        st.ram_now += sign * t.ram
        st.cpu_limit_now += sign * t.cpu_limit
        st.ram_limit_now += sign * t.ram_limit

    def remove(self, cid: int, now: float, finished: bool, oom: bool = False) -> None:
        t = self.containers.pop(cid, None)
        if t is None:
            return
        self._advance_node(now)
        self._advance(t, now)
        self._now(t, -1.0)
        st = self._stats
        if oom:
            st.tier(t.tier).ooms += 1
        if finished:
            st.finished_run_s += now - t.started_at
            st.finished_work_s += t.work_s

    def set_limits(self, cid: int, cpu: float, ram: float, now: float) -> None:
        """New limits (Autopilot): integrals so far at the old ones."""
        t = self.containers.get(cid)
        if t is None:
            return
        self._advance(t, now)
        self._now(t, -1.0)
        t.cpu_limit = cpu
        t.ram_limit = ram
        self._now(t, 1.0)

    def clear(self, now: float) -> None:
        for cid in list(self.containers):
            self.remove(cid, now, finished=False)

    def _advance(self, t: Tracked, now: float) -> None:
        """Integrate ``t``'s limits and usage up to ``now`` at its current values."""
        dt = now - t.last_t
        if dt <= 0:
            return
        tier = self._stats.tier(t.tier)
        tier.cpu_limit_s += t.cpu_limit * dt
        tier.cpu_used_s += t.cpu * dt
        tier.ram_limit_s += t.ram_limit * dt
        tier.ram_used_s += t.ram * dt
        tier.task_s += dt
        t.remaining_s = max(0.0, t.remaining_s - t.rate * dt)
        t.last_t = now

    def _advance_node(self, now: float) -> None:
        dt = now - self.last_sample_t
        if dt > 0 and self.containers:
            self._stats.node_s += dt
            if self.overflowing:
                self._stats.overflow_s += dt
        self.last_sample_t = now

    def sample(self, now: float) -> SampleResult:
        """Draw every container's usage; decide OOM kills, new finish times and what to report.
        The caller kills the ``ooms`` (and calls ``remove`` for them)."""
        self._advance_node(now)
        out = SampleResult()
        cap = self._capacity
        cpu_sum = ram_sum = 0.0
        for cid, t in self.containers.items():
            self._advance(t, now)
            self._now(t, -1.0)
            t.draw(now)
            self._now(t, 1.0)
            cpu_sum += t.cpu
            ram_sum += t.ram
            if t.ram_hard and t.ram > t.ram_limit + 1e-9:
                out.ooms.append((cid, True))
        self._stats.samples += 1
        self.overflowing = cpu_sum > cap.cpu + 1e-9 or ram_sum > cap.ram_gib + 1e-9
        killed = {cid for cid, _ in out.ooms}
        ram_left = sum(t.ram for cid, t in self.containers.items() if cid not in killed)
        if ram_left > cap.ram_gib + 1e-9:
            # The node's memory overflowed: the lowest tier goes first, its largest user first.
            victims = sorted(
                (t.tier, -t.ram, cid) for cid, t in self.containers.items() if cid not in killed
            )
            for _, neg_ram, cid in victims:
                if ram_left <= cap.ram_gib + 1e-9:
                    break
                out.ooms.append((cid, False))
                killed.add(cid)
                ram_left += neg_ram
        for _cid, over_limit in out.ooms:
            if over_limit:
                self._stats.ooms_limit += 1
            else:
                self._stats.ooms_node += 1
        self._throttle(out.retime, killed)
        for cid, t in self.containers.items():
            if cid not in killed and t.moved(self._threshold):
                out.moved.append(cid)
        return out

    def _throttle(self, retime: dict[int, float], killed: set[int]) -> None:
        """CPU: each container gets at most its limit, all together at most the node's cores."""
        live = [(cid, t) for cid, t in self.containers.items() if cid not in killed]
        granted = {cid: min(t.cpu, t.cpu_limit) for cid, t in live}
        total = sum(granted.values())
        scale = self._capacity.cpu / total if total > self._capacity.cpu else 1.0
        for cid, t in live:
            rate = min(1.0, granted[cid] * scale / t.cpu) if t.cpu > 0 else 1.0
            if rate != t.rate:
                t.rate = rate
                retime[cid] = t.remaining_s / max(rate, 1e-9)
