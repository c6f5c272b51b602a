"""Google cluster-usage traces v3 (clusterdata 2019, Borg): ``instance_events`` and, when given,
``collection_events``, as BigQuery exports them: JSON lines (``resource_request`` nested) or CSV
with a header row (``resource_request.cpus`` or ``resource_request_cpus`` flattened); plain or gzip.

Instance events read: ``time`` (µs), ``type`` (0 SUBMIT, 1 QUEUE, 2 ENABLE, 3 SCHEDULE, 4 EVICT,
5 FAIL, 6 FINISH, 7 KILL, 8 LOST, 9/10 UPDATE; the number or the name), ``collection_id``,
``instance_index``, ``priority``, ``machine_id``, ``resource_request`` ``cpus``/``memory`` (a
fraction of the largest machine). Collection events read: ``time``, ``type``, ``collection_id``,
``collection_type`` (0 job, 1 alloc set), ``priority``.

A job is a collection; it is submitted at its SUBMIT collection event (without collection
events: its first instance event). Each run of an instance (SCHEDULE to the next EVICT, FAIL,
FINISH, KILL or LOST) is a task of that length and of the request its SCHEDULE event carried;
a run still going at the end lasts to the file's last time. Priorities become pools: ``free``
(<= 99), ``batch`` (100-115), ``mid`` (116-119), ``production`` (120-359), ``monitoring`` (>= 360).
"""

from __future__ import annotations

import csv
import math
from collections.abc import Generator
from contextlib import closing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgspec

from emulator.scenario.schema import TraceConfig
from emulator.scenario.traces.model import Limits, NodeGroup, TaskBudget, Trace, TraceError, TraceJob
from emulator.scenario.traces.stream import Lines, Progress, Window, finish

TYPES = ("SUBMIT", "QUEUE", "ENABLE", "SCHEDULE", "EVICT", "FAIL", "FINISH", "KILL", "LOST",
         "UPDATE_PENDING", "UPDATE_RUNNING")
SUBMIT, SCHEDULE = 0, 3
ENDS = frozenset(range(4, 9))
AFTER_END = 2**63 - 1
MIN_REQUEST = 0.001
ALLOC_SET = 1
# CSV exports flatten the nested request: any of these names is read.
_ALIASES = {"resource_request.cpus": "cpus", "resource_request_cpus": "cpus",
            "resource_request.memory": "memory", "resource_request_memory": "memory"}


def tier(priority: int) -> str:
    if priority <= 99:
        return "free"
    if priority <= 115:
        return "batch"
    if priority <= 119:
        return "mid"
    return "production" if priority <= 359 else "monitoring"


@dataclass
class _Instance:
    cpu: float = 0.0
    mem: float = 0.0
    running_since: float | None = None
    size_at_start: tuple[float, float] = (0.0, 0.0)
    runs: list[tuple[float, float, float]] = field(default_factory=list)  # (duration, cpu, mem)


@dataclass
class _Job:
    submit_s: float
    priority: int = 0
    instances: dict[int, _Instance] = field(default_factory=dict)


def read(path: Path, cfg: TraceConfig, collections: Path | None = None,
         progress: Progress | None = None) -> Trace:
    limits = Limits(cfg.max_tasks, cfg.max_bytes)
    window = Window(cfg.start_s, cfg.span_s, cfg.sample, cfg.max_jobs)
    jobs: dict[str, _Job] = {}
    alloc_sets = 0
    if collections is not None:
        with closing(_records(collections, limits, progress)) as records:
            for where, rec in records:
                if _time(rec, where) is None or _type(rec, where) != SUBMIT:
                    continue
                cid = _id(rec, "collection_id", where)
                if _int(rec, "collection_type", where, 0) == ALLOC_SET:
                    alloc_sets += 1
                    continue
                t = _time(rec, where)
                assert t is not None
                if cid not in jobs and not window.full and window.keep(t):
                    jobs[cid] = _Job(t, _int(rec, "priority", where, 0))
        if not jobs:
            raise TraceError(f"{collections}: no job (collection_type 0) SUBMIT event in the window; "
                             "expected collection_events as exported")
    budget = TaskBudget(path, cfg.max_tasks)
    held = TaskBudget(path, cfg.max_tasks)
    passed_over: set[str] = set()
    machines: set[str] = set()
    last_s = 0.0
    events = 0
    with closing(_records(path, limits, progress)) as records:
        for where, rec in records:
            t = _time(rec, where)
            if t is None:
                continue
            events += 1
            event = _type(rec, where)
            cid = _id(rec, "collection_id", where)
            index = _int(rec, "instance_index", where)
            last_s = max(last_s, t)
            machine = rec.get("machine_id")
            if machine not in (None, "", 0, "0") and len(machines) < 1_000_000:
                machines.add(str(machine))  # the cluster: every machine of the file
            job = jobs.get(cid)
            if job is None:
                if collections is not None or cid in passed_over or window.full:
                    continue
                if not window.keep(t):
                    passed_over.add(cid)
                    continue
                job = jobs[cid] = _Job(t)
            inst = job.instances.get(index)
            if inst is None:  # counted as it is met: a file of instances that never run is bounded too
                held.take(1, f"line {where[1]}", "instance_index", "each instance kept is one")
                inst = job.instances[index] = _Instance()
            if rec.get("priority") not in (None, ""):
                job.priority = max(job.priority, _int(rec, "priority", where))
            cpu, mem = _request(rec, where)
            if cpu is not None:
                inst.cpu = cpu
            if mem is not None:
                inst.mem = mem
            if event == SUBMIT and collections is None:
                job.submit_s = min(job.submit_s, t)
            elif event == SCHEDULE:
                inst.running_since = t
                inst.size_at_start = (inst.cpu, inst.mem)
            elif event in ENDS and inst.running_since is not None:
                budget.take(1, f"line {where[1]}", "type", "each run of an instance is one")
                inst.runs.append((t - inst.running_since, *inst.size_at_start))
                inst.running_since = None
    if not events:
        raise TraceError(f"{path}: no instance events (expected clusterdata 2019 instance_events, "
                         "JSON lines or CSV with a header)")
    out: list[TraceJob] = []
    zero = 0
    for cid, job in jobs.items():
        tj = TraceJob(cid, cfg.pool or tier(job.priority), job.submit_s, [])
        for inst in job.instances.values():
            if inst.running_since is not None:
                budget.take(1, "the end of the file", "type", "an instance still running is one more")
                inst.runs.append((last_s - inst.running_since, *inst.size_at_start))
            for run, cpu, mem in inst.runs:
                if run <= 0:
                    continue
                zero += cpu == 0 or mem == 0
                tj.add_task(round(max(cpu, MIN_REQUEST) * cfg.machine_cpu, 6),
                            round(max(mem, MIN_REQUEST) * cfg.machine_ram_gib, 6), run)
        out.append(tj)
    kept = finish(out)
    if not kept:
        raise TraceError(f"{path}: no instance ran in the window (no SCHEDULE event followed by an end "
                         "or the end of the file)")
    warnings = []
    if zero:
        warnings.append(f"{path}: {zero} run(s) with a zero CPU or memory request: given {MIN_REQUEST:g} of "
                        "the largest machine")
    if alloc_sets:
        warnings.append(f"{collections}: {alloc_sets} alloc set(s) (collection_type 1): not jobs, dropped")
    nodes = [NodeGroup(len(machines), cfg.machine_cpu, cfg.machine_ram_gib)] if machines else []
    notes = ["Google 2019: alloc sets, constraints, scheduling class, users, vertical scaling, "
             "dependencies (start_after_collection_ids), usage and machine placement ignored"]
    return Trace(kept, nodes, warnings, notes, selected=True)


Where = tuple[Path, int]


def _records(
    path: Path, limits: Limits, progress: Progress | None
) -> Generator[tuple[Where, dict[str, Any]], None, None]:
    """Each event as a dict, from JSON lines or from CSV under its header row."""
    with Lines(path, limits, progress) as lines:
        header: list[str] | None = None
        is_json: bool | None = None
        for text in lines:
            if not text.strip():
                continue
            where = (path, lines.line_no)
            if is_json is None:
                is_json = text.lstrip().startswith("{")
            if is_json:
                try:
                    rec = msgspec.json.decode(text)
                except (msgspec.DecodeError, RecursionError, ValueError) as err:
                    raise TraceError(f"{path}: line {lines.line_no}: expected a JSON object: {err}") from None
                if not isinstance(rec, dict):
                    raise TraceError(f"{path}: line {lines.line_no}: expected a JSON object, "
                                     f"got {text[:40]!r}")
                request = rec.get("resource_request")
                if isinstance(request, dict):
                    rec.setdefault("cpus", request.get("cpus"))
                    rec.setdefault("memory", request.get("memory"))
                yield where, rec
                continue
            try:
                row = next(csv.reader([text]))
            except csv.Error as err:
                raise TraceError(f"{path}: line {lines.line_no}: expected comma-separated values: {err}") \
                    from None
            if header is None:
                header = [_ALIASES.get(h.strip(), h.strip()) for h in row]
                missing = [c for c in ("time", "type", "collection_id") if c not in header]
                if missing:
                    raise TraceError(f"{path}: line {lines.line_no}: expected a header row naming the "
                                     "columns (time, type, collection_id, ...); missing "
                                     f"{', '.join(missing)}")
                continue
            if len(row) != len(header):
                raise TraceError(f"{path}: line {lines.line_no}: expected {len(header)} columns as the "
                                 f"header names, found {len(row)}")
            yield where, dict(zip(header, row, strict=True))


def _err(where: Where, name: str, expected: str, got: Any) -> TraceError:
    return TraceError(f"{where[0]}: line {where[1]}: `{name}`: expected {expected}, got {str(got)[:40]!r}")


def _int(rec: dict[str, Any], name: str, where: Where, default: int | None = None) -> int:
    v = rec.get(name)
    if v is None or v == "":
        if default is None:
            raise _err(where, name, "an integer (the field is required)", v)
        return default
    if isinstance(v, bool) or not isinstance(v, int | str):
        raise _err(where, name, "an integer", v)
    try:
        n = int(v)
    except ValueError:
        raise _err(where, name, "an integer", v) from None
    if not -AFTER_END - 1 <= n <= AFTER_END:
        raise _err(where, name, "a 64-bit integer", v)
    return n


def _id(rec: dict[str, Any], name: str, where: Where) -> str:
    return str(_int(rec, name, where))


def _time(rec: dict[str, Any], where: Where) -> float | None:
    """Seconds; None for an event after the trace's end."""
    t = _int(rec, "time", where)
    if t < 0:
        raise _err(where, "time", "microseconds >= 0", rec.get("time"))
    return None if t == AFTER_END else t / 1e6


def _type(rec: dict[str, Any], where: Where) -> int:
    v = rec.get("type")
    if isinstance(v, str) and v.strip().upper() in TYPES:
        return TYPES.index(v.strip().upper())
    n = _int(rec, "type", where)
    if not 0 <= n < len(TYPES):
        raise _err(where, "type", f"an event type 0..{len(TYPES) - 1} or its name", v)
    return n


def _request(rec: dict[str, Any], where: Where) -> tuple[float | None, float | None]:
    out: list[float | None] = []
    for name in ("cpus", "memory"):
        v = rec.get(name)
        if v is None or v == "":
            out.append(None)
            continue
        try:
            f = float(v) if not isinstance(v, bool) else math.nan
        except (TypeError, ValueError):
            raise _err(where, f"resource_request.{name}", "a number in [0, 1]", v) from None
        if not 0 <= f <= 1:
            raise _err(where, f"resource_request.{name}",
                       "a number in [0, 1] (normalised to the largest machine)", v)
        out.append(f)
    return out[0], out[1]
