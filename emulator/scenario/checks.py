"""Checks across sections of a scenario, each about one field path: what the per-section schema
cannot see (names from a registry and their parameters, a task larger than every node, a fault
after the end, timeouts shorter than the configured delays, intervals so short that the run's work
has no bound, more memory than the machine has)."""

from __future__ import annotations

import math
from dataclasses import dataclass

from emulator.scenario.bounds import largest
from emulator.scenario.fault_schema import LivenessLossFault, MessageFault
from emulator.scenario.footprint import estimate, machine_memory
from emulator.scenario.names import problem as name_problem
from emulator.scenario.schema import Scenario


@dataclass(frozen=True)
class Problem:
    path: str  # e.g. "workload.operations[2]"
    message: str


def first_problem(sc: Scenario, machine_bytes: int | None = None) -> Problem | None:
    """The first thing that makes ``sc`` unusable; ``machine_bytes``: the memory to fit in
    (default: what this machine has available)."""
    named = name_problem(sc)
    if named is not None:
        return Problem(*named)
    for check in (_pool_cycles, _tasks_fit, _faults_in_run, _liveness_loss_has_ring, _expiry):
        problem = check(sc)
        if problem is not None:
            return problem
    # Memory first: a cluster no machine here holds is the first thing to say about it.
    return _memory(sc, machine_memory() if machine_bytes is None else machine_bytes) or _intervals(sc)


def _pool_cycles(sc: Scenario) -> Problem | None:
    pools = sc.workload.pools
    parents = {p.name: p.parent for p in pools}
    for i, p in enumerate(pools):
        chain = [p.name]
        while chain[-1] in parents and len(chain) <= len(parents):
            chain.append(parents[chain[-1]])
            if chain[-1] == p.name:
                loop = " -> ".join(f"`{n}`" for n in chain)
                return Problem(
                    f"workload.pools[{i}].parent",
                    f"pools form a cycle: {loop}; expected a `parent` chain that reaches `root`",
                )
    return None


def _tasks_fit(sc: Scenario) -> Problem | None:
    groups = [(largest(g.cpu), largest(g.ram_gib)) for g in sc.cluster.nodes]
    for i, op in enumerate(sc.workload.operations):
        if not any(cpu >= op.largest_cpu and ram >= op.largest_ram_gib for cpu, ram in groups):
            cpu, ram = max(c for c, _ in groups), max(r for _, r in groups)
            return Problem(
                f"workload.operations[{i}]",
                f"a task needs {op.largest_cpu:g} cpu and {op.largest_ram_gib:g} GiB, more than any node has "
                f"(largest: {cpu:g} cpu, {ram:g} GiB): it could never run; expected a task that fits a node",
            )
    return None


def _faults_in_run(sc: Scenario) -> Problem | None:
    end = sc.run.duration_s
    for i, f in enumerate(sc.faults):
        if f.at_s >= end:
            return Problem(
                f"faults[{i}].at_s",
                f"{f.at_s:g} s is not before the run ends (`run.duration_s` = {end:g}): the fault would "
                f"never happen; expected `at_s` < {end:g}",
            )
    return None


def _liveness_loss_has_ring(sc: Scenario) -> Problem | None:
    if sc.ring_enabled:
        return None
    for i, f in enumerate(sc.faults):
        if isinstance(f, LivenessLossFault):
            return Problem(
                f"faults[{i}].kind",
                "a `liveness_loss` fault needs the ring, which is off: expected `heartbeat.mode = "
                '"delta"` or `ring.enabled = true`',
            )
    return None


def _delay(sc: Scenario, message: str, direction: str) -> tuple[float, str]:
    """The longest delay a message fault adds to ``message`` going ``direction``, and its field."""
    worst, where = 0.0, ""
    for i, f in enumerate(sc.faults):
        if (
            isinstance(f, MessageFault)
            and f.delay_s > worst
            and f.direction in (direction, "both")
            and (not f.types or message in f.types)
        ):
            worst, where = f.delay_s, f"faults[{i}].delay_s"
    return worst, where


def _sum(parts: list[tuple[float, str]]) -> tuple[float, str]:
    """A total of named delays and how it is made up, e.g. ``0.7 s (2 × `transport.latency_s`)``."""
    parts = [(v, name) for v, name in parts if v > 0]
    total = sum(v for v, _ in parts)
    return total, " + ".join(name for _, name in parts)


def _expiry(sc: Scenario) -> Problem | None:
    monitor = sc.rm.liveliness_monitor
    if not (monitor if monitor is not None else sc.heartbeat.mode == "periodic"):
        return None
    latency = sc.transport.latency_s
    delay, where = _delay(sc, "Heartbeat", "to_rm")
    # A node's first heartbeat comes up to one interval after its registration's round trip.
    gap, parts = _sum([
        (sc.heartbeat.interval_s, "`heartbeat.interval_s`"), (2 * latency, "2 × `transport.latency_s`"),
        (delay, f"`{where}`"),
    ])
    if sc.rm.expiry_s > gap:
        return None
    return Problem(
        "rm.expiry_s",
        f"{sc.rm.expiry_s:g} s is not longer than the longest wait for a live node's heartbeat, {gap:g} s "
        f"({parts}): the liveliness monitor would lose live nodes; expected `rm.expiry_s` > {gap:g}",
    )


# The work periodic timers create. Each timer fires at most MAX_ROUNDS times over the run (the
# shipped scenarios: 2,400), and the nodes' timers together at most MAX_NODE_EVENTS_PER_S times per
# emulated second (10 million nodes at 3 s: 3.3 million; the shipped ones: 16,667). A heartbeat of a
# microsecond would otherwise be accepted, and make a run whose work has no bound.
MAX_ROUNDS = 1_000_000
MAX_NODE_EVENTS_PER_S = 10_000_000


def _intervals(sc: Scenario) -> Problem | None:
    """Intervals too short for the run's size (its length, its nodes)."""
    nodes, duration = sc.node_count, sc.run.duration_s
    monitor = sc.rm.liveliness_monitor
    timers = [("heartbeat.interval_s", sc.heartbeat.interval_s, "heartbeat ticks", nodes)]
    if sc.ring_enabled:
        timers.append(("ring.interval_s", sc.ring.interval_s, "ring checks", nodes))
    if (monitor if monitor is not None else sc.heartbeat.mode == "periodic") and sc.rm.monitor_interval_s:
        timers.append(("rm.monitor_interval_s", sc.rm.monitor_interval_s, "liveliness scans", nodes))
    timers.append(("run.sample_interval_s" if sc.run.sample_interval_s else "heartbeat.interval_s",
                   sc.sample_interval_s, "samples of the time series", 1))
    if sc.scheduler.preemption.enabled:
        timers.append(("scheduler.preemption.check_interval_s", sc.scheduler.preemption.check_interval_s,
                       "preemption checks", 1))
    for path, interval, what, per_tick in timers:
        rounds = duration / interval
        if rounds > MAX_ROUNDS:
            each = " per node" if per_tick > 1 else ""
            return Problem(path, (
                f"{interval:g} s makes {rounds:,.0f} {what}{each} over the run ({duration:g} s); expected at "
                f"most {MAX_ROUNDS:,}: `{path}` >= {_above(duration / MAX_ROUNDS):g} or a shorter "
                "`run.duration_s`"
            ))
        if per_tick / interval > MAX_NODE_EVENTS_PER_S:
            return Problem(path, (
                f"{interval:g} s makes {per_tick / interval:,.0f} {what} per emulated second ({per_tick:,} "
                f"nodes); expected at most {MAX_NODE_EVENTS_PER_S:,}: `{path}` >= "
                f"{_above(per_tick / MAX_NODE_EVENTS_PER_S):g} or fewer nodes"
            ))
    return None


def timing_notes(sc: Scenario) -> list[Problem]:
    """Ring timeouts shorter than the round trips the scenario configures. Not an error: the RM
    and the watchers add the round-trip timeout they measure to these waits (docs/ring.md,
    "Robustness"), so the effective timeouts are derived at run time; the user is told."""
    ring = sc.ring
    if not sc.ring_enabled or ring.detector != "kring":
        return []  # the paper's ring removes on a report and times nothing out
    latency = sc.transport.latency_s
    probe_delay, probe_where = _delay(sc, "Probe", "to_node")
    ack_delay, ack_where = _delay(sc, "ProbeAck", "to_rm")
    checks = [
        # The RM's probe goes to the suspect and its answer back, through message faults.
        ("probe_timeout", "a probe's round trip", [
            (2 * latency, "2 × `transport.latency_s`"), (probe_delay, f"`{probe_where}`"),
            (ack_delay, f"`{ack_where}`"),
        ]),
        # A watcher's ping goes between nodes: transport latency only.
        ("ping_timeout", "a ping's round trip", [(2 * latency, "2 × `transport.latency_s`")]),
    ]
    notes: list[Problem] = []
    for name, what, parts in checks:
        rtt, made_of = _sum(parts)
        timeout = getattr(ring, name)
        if timeout * ring.interval_s > rtt:
            continue
        notes.append(Problem(
            f"ring.{name}",
            f"{timeout:g} intervals ({timeout * ring.interval_s:g} s at `ring.interval_s` = "
            f"{ring.interval_s:g}) is not longer than {what}, {rtt:g} s ({made_of}); the run adds the "
            f"round-trip timeout it measures to this wait (set `ring.{name}` >= "
            f"{_above(rtt / ring.interval_s):g} to need no correction)",
        ))
    return notes


def _above(x: float) -> float:
    """The next value above ``x`` in steps of 0.001."""
    return (math.floor(x * 1000) + 1) / 1000


def _memory(sc: Scenario, machine_bytes: int) -> Problem | None:
    need = estimate(sc)
    if need.total <= machine_bytes:
        return None
    gib = 1 << 30
    return Problem(
        need.path,
        f"the run needs about {need.total / gib:.1f} GiB ({need.explain()}); this machine has "
        f"{machine_bytes / gib:.1f} GiB available: expected a scenario that fits",
    )
