"""Prometheus exposition of a live run: a custom collector read at scrape time.

Names follow the Prometheus conventions: an ``hbemu_`` prefix, base units in the name
(``_seconds``, ``_ratio``), ``_total`` for counters. Times are *emulated* seconds. Preemptions
are left out when preemption is off, rather than exported as a misleading zero.
"""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client import CollectorRegistry
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector

from emulator.measure.decisions import BUCKETS_US
from emulator.results import registry
from emulator.web.state import LiveRun


def _counter(name: str, doc: str, value: float) -> CounterMetricFamily:
    return CounterMetricFamily(name, doc, value=value)


def _gauge(name: str, doc: str, value: float) -> GaugeMetricFamily:
    return GaugeMetricFamily(name, doc, value=value)


class RunCollector(Collector):
    def __init__(self, live: LiveRun) -> None:
        self._live = live

    def collect(self) -> Iterator[Metric]:
        live = self._live
        yield _gauge("hbemu_emulated_time_seconds", "Emulated time since the start of the run.", live.now())
        paused = GaugeMetricFamily("hbemu_run_paused", "1 while the run is paused from the page.")
        paused.add_metric([], 1.0 if live.phase.value == "paused" else 0.0)
        yield paused
        run = live.run
        if run is None:
            return
        snap = run.side.rm.snapshot()
        c = snap.counters
        ns = run.side.hosting.counters()
        # The registry's counters, under its /metrics names and meanings; once the run is over,
        # summary.json's values (the page's API gives the same).
        now: dict[str, float | None] = {
            "heartbeats_sent": ns.heartbeats_sent, "heartbeat_responses": ns.heartbeat_responses,
            "update_events": c.update_events, "allocations": c.allocations,
            "containers_completed": c.containers_completed, "tasks_requeued": c.tasks_requeued,
            "nodes_lost": c.nodes_lost, "false_removals": live.false_removals,
            "refusals": snap.policy.refusals, "fallback_allocations": snap.policy.fallback_allocations,
            "preemptions": snap.preemption.preemptions if snap.preemption is not None else None,
        }
        for metric in registry.REGISTRY:
            value = now.get(metric.name)
            if metric.prom is None or value is None:
                continue  # e.g. preemptions with preemption off: left out, not a misleading zero
            final = registry.lookup(live.summary, metric.name) if live.summary is not None else None
            yield _counter(metric.prom, metric.meaning, value if final is None else float(final))
        busy = CounterMetricFamily("hbemu_rm_busy_seconds", "Emulated service time spent by an RM queue's "
                                   "worker.", labels=["queue"])
        depth = GaugeMetricFamily("hbemu_rm_queue_depth", "Items waiting in an RM queue.", labels=["queue"])
        for label, st in (("inbound", snap.inbound), ("scheduler", snap.scheduler)):
            busy.add_metric([label], st.busy_s)
            depth.add_metric([label], st.depth)
        yield busy
        yield depth
        util = GaugeMetricFamily("hbemu_utilization_ratio", "Allocated / schedulable capacity.",
                                 labels=["resource"])
        util.add_metric(["cpu"], snap.cpu_utilization)
        util.add_metric(["ram"], snap.ram_utilization)
        yield util
        yield _gauge("hbemu_capacity_cpu_cores", "Schedulable CPU cores.", snap.capacity.cpu)
        yield _gauge("hbemu_capacity_ram_bytes", "Schedulable RAM.", snap.capacity.ram_gib * 2**30)
        # A partition of the cluster: the states add up to its size. "lost" is the nodes removed
        # and not registered again now (the removals themselves are hbemu_nodes_removed_total).
        nodes = GaugeMetricFamily("hbemu_nodes", "NodeManagers by state now (they add up to the "
                                  "cluster size).", labels=["state"])
        gone = len(live.gone)
        nodes.add_metric(["running"], snap.nodes - snap.nodes_unhealthy)
        nodes.add_metric(["unhealthy"], snap.nodes_unhealthy)
        nodes.add_metric(["lost"], gone)
        nodes.add_metric(["unregistered"], max(0, live.scenario.node_count - snap.nodes - gone))
        yield nodes
        tasks = GaugeMetricFamily("hbemu_tasks", "Tasks of active operations by state.", labels=["state"])
        tasks.add_metric(["running"], snap.running_tasks)
        tasks.add_metric(["pending"], snap.pending_tasks)
        yield tasks
        h = live.detection
        cumulative = 0
        buckets = []
        for edge, n in zip((*h.buckets, float("inf")), h.counts, strict=True):
            cumulative += n
            buckets.append(("+Inf" if edge == float("inf") else repr(edge), cumulative))
        yield HistogramMetricFamily(
            "hbemu_detection_latency_seconds", "Injected crash to removal by the RM (emulated seconds).",
            buckets=buckets, sum_value=h.sum,
        )
        d = run.side.decisions
        cumulative = 0
        buckets = []
        for edge_us, n in zip((*BUCKETS_US, float("inf")), d.counts, strict=True):
            cumulative += n
            buckets.append(("+Inf" if edge_us == float("inf") else repr(edge_us / 1e6), cumulative))
        yield HistogramMetricFamily(
            "hbemu_scheduler_decision_seconds",
            "Wall time the scheduler took per event (node update or scheduling pass).",
            buckets=buckets, sum_value=d.total_s(),
        )


def make_registry(live: LiveRun) -> CollectorRegistry:
    registry = CollectorRegistry(auto_describe=True)
    registry.register(RunCollector(live))
    return registry
