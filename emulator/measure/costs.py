"""RM cost accounting in wall time: what each message type really costs the RM process.

Installed on a real-time RM (``RMCostMeter.install``), it times every item of the RM's two
dispatchers (node messages by type; scheduler node updates and continuous-scheduling passes) and
the transport's frame decoding, fits the linear service-time model the virtual clock uses
(``rm.config.ServiceTimeConfig``: a heartbeat costs a + b x statuses, a node update c + d x
allocations), and reports busy fraction, process CPU and traffic per node per minute.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from emulator.measure.decisions import BATCH, DecisionTimer, TimedSamples
from emulator.time.clock import wall_time
from rm import Handler, Inbound, LogHistogram, NodeUpdate, ResourceManager, SchedulerItem
from rm.protocol import Heartbeat


class LinearFit:
    """Least squares y = a + b x, from running sums (constant memory)."""

    __slots__ = ("n", "sx", "sxx", "sxy", "sy")

    def __init__(self) -> None:
        self.n = 0
        self.sx = self.sy = self.sxx = self.sxy = 0.0

    def add(self, x: float, y: float) -> None:
        self.n += 1
        self.sx += x
        self.sy += y
        self.sxx += x * x
        self.sxy += x * y

    def add_arrays(self, xs: Sequence[float] | np.ndarray, ys: Sequence[float] | np.ndarray) -> None:
        """Every pair of ``xs`` and ``ys`` (as a call of ``add`` for each), summed with numpy."""
        x = np.asarray(xs, dtype=np.float64)
        y = np.asarray(ys, dtype=np.float64)
        if not len(x):
            return
        self.n += len(x)
        self.sx += float(x.sum())
        self.sy += float(y.sum())
        self.sxx += float(x @ x)
        self.sxy += float(x @ y)

    def coefficients(self) -> tuple[float, float]:
        """(intercept, slope); slope 0 when x never varied; both clipped at 0 (costs)."""
        if self.n == 0:
            return 0.0, 0.0
        var = self.n * self.sxx - self.sx * self.sx
        if var <= 1e-12 * max(1.0, self.sxx):
            return max(0.0, self.sy / self.n), 0.0
        b = max(0.0, (self.n * self.sxy - self.sx * self.sy) / var)
        a = max(0.0, (self.sy - b * self.sx) / self.n)
        return a, b


class RMCostMeter:
    """Its samples are kept in lists and bucketed, and the fits summed, in batches with numpy
    (``TimedSamples``): the RM process pays for the measurement on every heartbeat."""

    def __init__(self, rm: ResourceManager) -> None:
        self._rm = rm
        # Wall seconds per node message handled, by its type (``busy`` names them with the
        # scheduler's events, which the decision timer holds).
        self._busy: dict[type, TimedSamples] = {}
        self._hb_statuses: list[int] = []  # beside the Heartbeat samples not yet bucketed
        self._update_allocs: list[int] = []  # (allocations, wall s) of node updates not yet fitted
        self._update_dts: list[float] = []
        self.decode = LogHistogram()
        self._heartbeat_fit = LinearFit()
        self._update_fit = LinearFit()
        self._wall0 = self._cpu0 = 0.0
        self._wall1 = self._cpu1 = 0.0
        # Wall seconds of scheduler events handled inside an inbound item (a heartbeat's node
        # update runs at once when the scheduler is free): counted for the event, not twice.
        self._nested_s = 0.0
        self._allocs_seen = 0  # allocations when the last scheduler event ended
        self._decisions: DecisionTimer | None = None  # times the scheduler's events (``install``)

    def install(self, decisions: DecisionTimer | None = None) -> None:
        """``decisions``: the run's scheduler-decision timer, already installed; its clock
        readings and histograms time the scheduler's events here too (else the meter installs
        one of its own). Its observer (the RM's arrivals, for h2) is told each event still."""
        self._allocs_seen = self._rm.allocations
        if decisions is None:
            decisions = DecisionTimer()
            self._rm.instrument(self._wrap_inbound, decisions.wrap)
        else:
            self._rm.instrument(self._wrap_inbound, lambda handler: handler)
        decisions.observer = self._observer(decisions.observer)
        self._decisions = decisions

    @property
    def busy(self) -> dict[str, LogHistogram]:
        """Wall seconds per handled item, by kind (message or event type name)."""
        events = self._decisions.by_type if self._decisions is not None else {}
        self._flush()
        inbound = {cls: samples.hist for cls, samples in self._busy.items()}
        return {cls.__name__: h for cls, h in (*inbound.items(), *events.items())}

    @property
    def heartbeat_fit(self) -> LinearFit:
        """Wall seconds of a heartbeat against its statuses."""
        self._flush()
        return self._heartbeat_fit

    @property
    def update_fit(self) -> LinearFit:
        """Wall seconds of a node update against the allocations it made."""
        self._flush()
        return self._update_fit

    def _flush(self) -> None:
        for cls, samples in self._busy.items():
            self._flush_samples(cls, samples)
        self._flush_updates()

    def _flush_samples(self, cls: type, samples: TimedSamples) -> None:
        dts = samples.flush()
        if cls is Heartbeat:
            self._heartbeat_fit.add_arrays(self._hb_statuses, dts)
            self._hb_statuses.clear()

    def _flush_updates(self) -> None:
        self._update_fit.add_arrays(self._update_allocs, self._update_dts)
        self._update_allocs.clear()
        self._update_dts.clear()

    def start(self) -> None:
        self._wall0, self._cpu0 = wall_time(), time.process_time()

    def stop(self) -> None:
        self._wall1, self._cpu1 = wall_time(), time.process_time()

    def _wrap_inbound(self, handler: Handler[Inbound]) -> Handler[Inbound]:
        busy = self._busy
        hb_statuses = self._hb_statuses
        flush = self._flush_samples
        now = wall_time

        def timed(item: Inbound) -> float | None:
            nested0 = self._nested_s
            t0 = now()
            extra = handler(item)
            dt = now() - t0 - (self._nested_s - nested0)
            msg = item[1]
            cls = type(msg)
            samples = busy.get(cls)
            if samples is None:
                samples = busy[cls] = TimedSamples()
            dts = samples.dts
            dts.append(dt)
            if type(msg) is Heartbeat:
                hb_statuses.append(len(msg.statuses))
            if len(dts) >= BATCH:
                flush(cls, samples)
            return extra

        return timed

    def _observer(
        self, before: Callable[[SchedulerItem, float], None] | None
    ) -> Callable[[SchedulerItem, float], None]:
        """The decision timer's observer: ``before`` (the RM's arrivals, for h2), then the meter's
        own tally, in one call per event."""
        counters = self._rm.live_counters()
        allocs_x = self._update_allocs
        dts = self._update_dts
        flush = self._flush_updates

        def on_event(item: SchedulerItem, dt: float) -> None:
            """A scheduler event took ``dt`` wall seconds. Allocations happen only in events, so
            those made since the last one ended are this one's."""
            if before is not None:
                before(item, dt)
            self._nested_s += dt
            allocs = counters.allocations
            made, self._allocs_seen = allocs - self._allocs_seen, allocs
            if type(item) is NodeUpdate:
                allocs_x.append(made)
                dts.append(dt)
                if len(dts) >= BATCH:
                    flush()

        return on_event

    # ---- report -------------------------------------------------------------------------

    def busy_s(self) -> float:
        return sum(h.sum for h in self.busy.values()) + self.decode.sum

    def report(
        self, nodes: int, emulated_s: float, speed: float, traffic: dict[str, int] | None
    ) -> dict[str, Any]:
        wall = max((self._wall1 or wall_time()) - self._wall0, 1e-9)
        cpu = (self._cpu1 or time.process_time()) - self._cpu0
        self._flush()
        hb_a, hb_b = self.heartbeat_fit.coefficients()
        up_c, up_d = self.update_fit.coefficients()
        per_type = {
            kind: {k: round(v * 1e6 if k != "count" else v, 3) for k, v in h.summary().items()}
            for kind, h in sorted(self.busy.items())
        }
        if self.decode.count:
            per_type["decode"] = {
                k: round(v * 1e6 if k != "count" else v, 3) for k, v in self.decode.summary().items()
            }
        reg = self.busy.get("Register")
        hb = self.busy.get("Heartbeat")
        upd = self.busy.get("NodeUpdate")
        hb_count = hb.count if hb else 0
        per_hb = None
        if hb is not None and hb_count:
            # Everything a heartbeat makes the RM do: decode, tracker, and its node-update event.
            total = hb.sum + (upd.sum if upd else 0.0) + self.decode.mean() * hb_count
            per_hb = round(total / hb_count * 1e6, 3)
        minutes = max(emulated_s / 60, 1e-9)
        out: dict[str, Any] = {
            "wall_s": round(wall, 3),
            "rm_cpu_percent": round(100 * cpu / wall, 2),
            "rm_busy_fraction": round(self.busy_s() / wall, 4),
            "rm_cost_us_per_heartbeat": per_hb,
            "busy_us_by_type": per_type,
            # The virtual clock's service-time model, fitted to these measurements (wall µs).
            "service_time_us": {
                "heartbeat_us": round(hb_a * 1e6 + self.decode.mean() * 1e6, 3),
                "heartbeat_per_status_us": round(hb_b * 1e6, 4),
                "node_update_us": round(up_c * 1e6, 3),
                "allocation_us": round(up_d * 1e6, 3),
                "register_us": round(reg.mean() * 1e6, 3) if reg is not None else 0.0,
            },
            "speed": speed,
        }
        if traffic is not None and nodes > 0:
            out["messages_to_rm_per_node_minute"] = round(traffic["frames_in"] / nodes / minutes, 3)
            out["bytes_to_rm_per_node_minute"] = round(traffic["bytes_in"] / nodes / minutes, 1)
            out["bytes_from_rm_per_node_minute"] = round(traffic["bytes_out"] / nodes / minutes, 1)
        return out
