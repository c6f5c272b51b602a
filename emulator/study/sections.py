"""What a study keeps of each point besides its registry metrics (a study's ``collect``): a section
of the run's summary.json as it is (``pools``, ``fair_cpu_bound``, ``detection_latency_s`` ...),
one column of its timeseries.csv (``timeseries.removals``: a value per sample), or a wall-clock
figure of its timing.json (``timing.scheduler_decision_us``: measured, so it differs from run to
run, unlike everything else of a virtual-time run), or a total of the run's messages to or from
the RM (``traffic.to_rm_bytes``), or the RM's unrounded service time (``rm.busy_s``). Tables that need
more than whole-run figures (E1's per-user shares and pooled bound, E3's quiet-window message
rate and removals plot) render from these."""

from __future__ import annotations

import difflib
from collections.abc import Callable
from typing import Any

from emulator.harness.invariants import InvariantSummary
from emulator.harness.outcome import RunOutcome
from emulator.measure.sampler import COLUMNS

TIMESERIES = "timeseries."
TIMING = "timing."
TRAFFIC = "traffic."
RM = "rm."
# The run's totals of the messages to the RM (summary.json has them per node-minute).
TRAFFIC_FIELDS: dict[str, Callable[[RunOutcome], int]] = {
    "to_rm_messages": lambda o: o.to_rm.messages, "to_rm_bytes": lambda o: o.to_rm.bytes,
}
# The RM's emulated service time, queue and scheduler together, unrounded (summary.json has each
# as a rounded fraction): the CPU a virtual-time run's RM spent by its service-time model.
RM_FIELDS: dict[str, Callable[[RunOutcome], float]] = {
    "busy_s": lambda o: o.rm.inbound.busy_s + o.rm.scheduler.busy_s,
}
# timing.json's figures (results/summary.py write_results), from the run's outcome.
TIMING_FIELDS: dict[str, Callable[[RunOutcome], Any]] = {
    "wall_s": lambda o: round(o.wall_s, 3),
    "scheduler_decision_us": lambda o: o.scheduler_decision_us,
    "rm_restart_replay_wall_s": lambda o: o.restart_replay_wall_s or None,
    # How late the emulator ran its heartbeat ticks (a real-time run's own lag; 0 in virtual time).
    "lateness_p99_s": lambda o: o.lateness.p99 if o.lateness.count else None,
}
# The top-level fields a summary.json may have (some only for some runs: a ring, jobs, usage
# models, tiers, placement, RM restarts, real time); tests/unit/test_study_collect.py checks a
# real summary against this list.
SUMMARY_SECTIONS: tuple[str, ...] = (
    "scenario", "seed", "clock", "duration_s", "warmup_s", "heartbeat_mode", "heartbeat_interval_s",
    "join_over_s", "policy", "nodes", "nodes_alive_end", "cpu_utilization", "ram_utilization",
    "heartbeats_sent", "heartbeat_responses", "heartbeats_skipped", "statuses_sent", "update_events",
    "h1", "h2", "nodes_lost", "registrations", "resyncs", "allocations", "containers_completed",
    "tasks_requeued", "rm_queue_depth_max", "rm_wait_mean_s", "rm_wait_p99_s", "rm_wait_max_s",
    "rm_busy_fraction", "scheduler_queue_depth_max", "scheduler_busy_fraction",
    "messages_to_rm_per_node_minute", "measurement_window_s", "operations", "jobs",
    # scheduling
    "refusals", "fallback_allocations", "packing_offers", "acceptance_rate", "refusals_per_allocation",
    "preemptions", "preempted_cpu_s", "cpu_utilization_excl_preempted", "fairness_deviation",
    "fairness_deviation_max", "fair_cpu_bound", "fair_ram_bound", "fragmentation_gap_cpu",
    "fragmentation_gap_ram", "pools",
    # failure detection and membership
    "false_removals", "false_removed_nodes", "stalled_removals", "crashed_nodes", "crashed_removed",
    "crashed_by_scenario", "crashed_from_page", "crashed_removed_by_scenario",
    "crashed_removed_from_page", "detection_latency_s", "rm_messages_per_node_minute",
    "rm_bytes_per_node_minute", "failure_detector", "ring_messages_per_node_minute", "ring_reports",
    "ring_reports_rejected", "ring_probes", "ring_refuted", "ring_brake_held", "ring_probe_loss",
    "ring_probe_rounds_extended", "ring_late_answers", "ring_deltas", "membership_bytes_join",
    "membership_bytes_removal", "liveness_lost",
    # RM restarts, message faults, the invariant checker
    "resumed", "takeovers", "containers_completed_by_earlier_processes", "rm_restarts", "recovery_s",
    "messages_dropped", "messages_duplicated", "messages_reordered", "messages_delayed",
    "commands_resent", *InvariantSummary.__struct_fields__,
    # only some runs
    "partial", "ended_at_s", "failure", "dead_workers", "overloaded", "removals_in_stalls", "lag",
    "costs", "workers", "usage", "tiers", "binpack",
)


def known() -> list[str]:
    return [*SUMMARY_SECTIONS, *(TIMESERIES + c for c in COLUMNS), *(TIMING + f for f in TIMING_FIELDS),
            *(TRAFFIC + f for f in TRAFFIC_FIELDS), *(RM + f for f in RM_FIELDS)]


def section_problem(name: str) -> str | None:
    """Why ``name`` cannot be collected (None if it can)."""
    if (name in SUMMARY_SECTIONS or (name.startswith(TIMING) and name.removeprefix(TIMING) in TIMING_FIELDS)
            or (name.startswith(TRAFFIC) and name.removeprefix(TRAFFIC) in TRAFFIC_FIELDS)
            or (name.startswith(RM) and name.removeprefix(RM) in RM_FIELDS)):
        return None
    if name.startswith(TIMESERIES):
        column = name.removeprefix(TIMESERIES)
        if column in COLUMNS:
            return None
        close = difflib.get_close_matches(column, COLUMNS, n=1, cutoff=0.6)
        hint = f"did you mean `{TIMESERIES}{close[0]}`? " if close else ""
        return (f"`{column}` is not a column of timeseries.csv; {hint}"
                f"(expected one of {', '.join(COLUMNS)})")
    close = difflib.get_close_matches(name, known(), n=1, cutoff=0.6)
    hint = f"did you mean `{close[0]}`? " if close else ""
    return (f"`{name}` is not a section of summary.json, a `{TIMESERIES}COLUMN`, `{TIMING}FIELD`, "
            f"`{TRAFFIC}FIELD` or `{RM}FIELD`; {hint}(the top-level fields of a run's summary.json)")


def collect(outcome: RunOutcome, summary: dict[str, Any], names: list[str]) -> dict[str, Any]:
    """The sections ``names`` of one finished run (a summary field the run lacks: None)."""
    out: dict[str, Any] = {}
    for name in names:
        if name.startswith(TIMING):
            out[name] = TIMING_FIELDS[name.removeprefix(TIMING)](outcome)
        elif name.startswith(TRAFFIC):
            out[name] = TRAFFIC_FIELDS[name.removeprefix(TRAFFIC)](outcome)
        elif name.startswith(RM):
            out[name] = RM_FIELDS[name.removeprefix(RM)](outcome)
        elif name.startswith(TIMESERIES):
            column = name.removeprefix(TIMESERIES)
            out[name] = [getattr(row, column) for row in outcome.rows]
        else:
            out[name] = summary.get(name)
    return out
