"""Prometheus exposition of a live run: a custom collector read at scrape time.

Names follow the Prometheus conventions: an ``hbemu_`` prefix, base units in the name
(``_seconds``, ``_ratio``), ``_total`` for counters. Times are *emulated* seconds. Counters of
features this build does not have (refusals, preemptions before packing lands) are left out
rather than exported as a misleading zero.
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

from emulator.web.state import LiveRun, counter
from rm.cluster import NodeState as RMNodeState


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
        out = live.outcome
        if out is None:
            return
        rm = out.rm
        cl = rm.cluster
        ns = out.node_stats
        yield _counter("hbemu_heartbeats_sent", "Heartbeats sent by NodeManagers.", ns.heartbeats_sent)
        yield _counter("hbemu_heartbeat_responses", "Heartbeat responses received by NodeManagers.",
                       ns.heartbeat_responses)
        yield _counter("hbemu_scheduler_update_events", "Node-update events processed by the scheduler.",
                       rm.stats.update_events)
        yield _counter("hbemu_allocations", "Containers allocated.", rm.stats.allocations)
        yield _counter("hbemu_containers_completed", "Containers completed successfully.",
                       rm.stats.containers_completed)
        yield _counter("hbemu_tasks_requeued", "Running tasks requeued (node lost, preempted).",
                       rm.stats.tasks_requeued)
        yield _counter("hbemu_nodes_removed", "Nodes the RM declared lost.", rm.stats.nodes_lost)
        yield _counter("hbemu_false_removals", "Removed nodes that no fault had touched.",
                       live.false_removals)
        for name, doc in (("refusals", "Offers refused by operations (packing)."),
                          ("fallback_allocations", "Allocations made ignoring packing (all refused)."),
                          ("preemptions", "Tasks preempted.")):
            value = counter(rm, name)
            if value is not None:
                yield _counter(f"hbemu_{name}", doc, value)
        busy = CounterMetricFamily("hbemu_rm_busy_seconds", "Emulated service time spent by an RM queue's "
                                   "worker.", labels=["queue"])
        depth = GaugeMetricFamily("hbemu_rm_queue_depth", "Items waiting in an RM queue.", labels=["queue"])
        for label, disp in (("inbound", rm.inbound), ("scheduler", rm.events)):
            st = disp.statistics()
            busy.add_metric([label], st.busy_s)
            depth.add_metric([label], st.depth)
        yield busy
        yield depth
        util = GaugeMetricFamily("hbemu_utilization_ratio", "Allocated / schedulable capacity.",
                                 labels=["resource"])
        util.add_metric(["cpu"], cl.used_cpu / cl.cap_cpu if cl.cap_cpu > 0 else 0.0)
        util.add_metric(["ram"], cl.used_ram / cl.cap_ram if cl.cap_ram > 0 else 0.0)
        yield util
        yield _gauge("hbemu_capacity_cpu_cores", "Schedulable CPU cores.", cl.cap_cpu)
        yield _gauge("hbemu_capacity_ram_bytes", "Schedulable RAM.", cl.cap_ram * 2**30)
        nodes = GaugeMetricFamily("hbemu_nodes", "NodeManagers by state.", labels=["state"])
        unhealthy = sum(1 for n in cl.nodes.values() if n.state is RMNodeState.UNHEALTHY)
        nodes.add_metric(["running"], len(cl.nodes) - unhealthy)
        nodes.add_metric(["unhealthy"], unhealthy)
        nodes.add_metric(["lost"], rm.stats.nodes_lost)
        nodes.add_metric(["unregistered"], max(0, len(out.nodes) - len(cl.by_address)))
        yield nodes
        ops = list(rm.operations.values())
        tasks = GaugeMetricFamily("hbemu_tasks", "Tasks of active operations by state.", labels=["state"])
        tasks.add_metric(["running"], sum(o.running for o in ops))
        tasks.add_metric(["pending"], sum(len(o.pending) for o in ops))
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


def make_registry(live: LiveRun) -> CollectorRegistry:
    registry = CollectorRegistry(auto_describe=True)
    registry.register(RunCollector(live))
    return registry
