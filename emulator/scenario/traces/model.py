"""What every trace format is read into: jobs of task groups, and optionally the cluster.

A job's tasks are grouped by size (an operation has one demand vector); each task keeps its own
recorded duration. Errors name the file, the record (line) and the field; fields a reader does
not know are reported once each as warnings, not errors.
"""

from __future__ import annotations

import json
import os
import re
import stat
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

# Checked while a trace is read, before anything is expanded: a few bytes (`count: 1e9`) must not
# make a reader spin and grow without bound.
from emulator.scenario.schema import MAX_TRACE_BYTES, MAX_TRACE_TASKS

MIB_PER_GIB = 1024.0
_SPACE = re.compile(r"\s*")


class TraceError(Exception):
    """A trace cannot be used; the message names the file, the record and the field."""


@dataclass
class TaskGroup:
    """Tasks of one size and kind. ``after``: indices (in the job's ``groups``) of the groups whose
    every task must complete before this group's tasks are requested (a MapReduce job's reduces
    wait for its maps); ``delay_s``: requested this long after the job's submission at the
    earliest (SLS's per-container request delay)."""

    cpu: float
    ram_gib: float
    durations_s: list[float] = field(default_factory=list)
    kind: str = ""
    after: list[int] = field(default_factory=list)
    delay_s: float = 0.0


@dataclass
class TraceJob:
    job_id: str
    pool: str
    submit_s: float
    groups: list[TaskGroup]
    # The job's application master container (vcores, GiB), as SLS runs one per job: it runs
    # first, and the job's tasks are requested once it runs. None: the format has none.
    am: tuple[float, float] | None = None

    def add_task(self, cpu: float, ram_gib: float, duration_s: float, kind: str = "",
                 delay_s: float = 0.0) -> None:
        for g in self.groups:
            if g.cpu == cpu and g.ram_gib == ram_gib and g.kind == kind and g.delay_s == delay_s:
                g.durations_s.append(duration_s)
                return
        self.groups.append(TaskGroup(cpu, ram_gib, [duration_s], kind, [], delay_s))

    def reduces_after_maps(self) -> None:
        """Every ``reduce`` group waits for every ``map`` group (SLS's MapReduce AM asks for its
        reducers once all its maps are done)."""
        maps = [i for i, g in enumerate(self.groups) if g.kind == "map"]
        for g in self.groups:
            if g.kind == "reduce":
                g.after = list(maps)

    @property
    def tasks(self) -> int:
        return sum(len(g.durations_s) for g in self.groups)


@dataclass
class NodeGroup:
    count: int
    cpu: float
    ram_gib: float


@dataclass
class Trace:
    jobs: list[TraceJob]
    nodes: list[NodeGroup] = field(default_factory=list)  # empty: the trace does not say
    warnings: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # what was ignored or assumed
    # The reader applied the window (start, span, sample, max jobs) while reading: `jobs` are the
    # kept ones, in submit order.
    selected: bool = False


class Where:
    """One record of a trace file, for error messages: ``file: record 3 (line 41): field ...``."""

    def __init__(self, path: Path, record: int, line: int) -> None:
        self.path = path
        self.record = record
        self.line = line

    def error(self, fld: str, expected: str, got: Any = None) -> TraceError:
        found = "" if got is None else f", got {json.dumps(got)[:60]}"
        return TraceError(
            f"{self.path}: record {self.record} (line {self.line}): `{fld}`: expected {expected}{found}"
        )


class Unknown:
    """Collects each unknown field name once."""

    def __init__(self, path: Path) -> None:
        self._path = path
        self._seen: set[str] = set()
        self.warnings: list[str] = []

    def check(self, obj: dict[str, Any], known: frozenset[str], where: Where, prefix: str = "") -> None:
        for k in obj:
            name = prefix + k
            if k not in known and name not in self._seen:
                self._seen.add(name)
                self.warnings.append(
                    f"{self._path}: unknown field `{name}` (first at line {where.line}), ignored"
                )


@dataclass(frozen=True)
class Limits:
    """``max_tasks``: tasks (containers) the whole trace may expand into; ``max_bytes``: its file
    size. ``[workload.trace]`` ``max_tasks`` / ``max_bytes`` and ``emulator import --max-tasks``
    / ``--max-bytes`` set them."""

    max_tasks: int = MAX_TRACE_TASKS
    max_bytes: int = MAX_TRACE_BYTES


DEFAULT_LIMITS = Limits()


class TaskBudget:
    """Counts the tasks a reader expands, refusing the first expansion that would pass the cap."""

    def __init__(self, path: Path, limit: int) -> None:
        self._path = path
        self.limit = limit
        self.used = 0

    def take(self, n: int, where: Where | str, fld: str, what: str = "") -> None:
        """``where``: the record, or a place in words (``line 7``)."""
        if n > self.limit - self.used:
            at = f"record {where.record} (line {where.line}): " if isinstance(where, Where) else f"{where}: "
            detail = f" ({what})" if what else ""
            raise TraceError(
                f"{self._path}: {at}`{fld}`: expected at most {self.limit:,} tasks in the whole trace "
                f"(`max_tasks`, --max-tasks), but it would make {self.used + n:,}{detail}"
            )
        self.used += n


def read_text(path: Path, max_bytes: int = MAX_TRACE_BYTES) -> str:
    """The file's text; refuses what is not a regular file (``/dev/zero``, a pipe) and files over
    ``max_bytes`` without reading them, and reads at most ``max_bytes`` of one that grows."""
    not_regular = TraceError(f"{path}: expected a regular file (not a device, pipe or directory)")
    try:
        if not stat.S_ISREG(os.stat(path).st_mode):  # before opening: opening a pipe would block
            raise not_regular
        with path.open("rb") as f:
            st = os.fstat(f.fileno())
            if not stat.S_ISREG(st.st_mode):  # replaced in between
                raise not_regular
            if st.st_size > max_bytes:
                raise TraceError(f"{path}: {st.st_size:,} bytes; expected at most {max_bytes:,} "
                                 "(`max_bytes`, --max-bytes)")
            data = f.read(max_bytes + 1)
    except FileNotFoundError:
        raise TraceError(f"{path}: no such file") from None
    except OSError as err:
        raise TraceError(f"{path}: cannot read: {err}") from None
    if len(data) > max_bytes:
        raise TraceError(f"{path}: more than {max_bytes:,} bytes (it grew while read); expected at most "
                         f"{max_bytes:,} (`max_bytes`, --max-bytes)")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as err:
        raise TraceError(f"{path}: cannot read: not UTF-8 text (byte {err.start})") from None


def json_stream(path: Path, max_bytes: int = MAX_TRACE_BYTES) -> Iterator[tuple[Where, Any]]:
    """The JSON values of a file holding one or more of them one after another (as SLS and Rumen
    write them), with their record number and line."""
    text = read_text(path, max_bytes)
    decoder = json.JSONDecoder()
    pos = 0
    record = 0
    line, counted = 1, 0  # lines counted up to ``counted`` (once each: a long stream stays linear)
    n = len(text)
    while True:
        pos = _SPACE.match(text, pos).end()  # type: ignore[union-attr]  # \s* always matches
        if pos >= n:
            return
        record += 1
        line += text.count("\n", counted, pos)
        counted = pos
        try:
            value, end = decoder.raw_decode(text, pos)
        except json.JSONDecodeError as err:
            raise TraceError(f"{path}: record {record}: not valid JSON at line {err.lineno} column "
                             f"{err.colno}: {err.msg}") from None
        except RecursionError:
            raise TraceError(f"{path}: record {record} (line {line}): nested too deeply") from None
        except ValueError as err:  # an integer of more digits than Python converts
            raise TraceError(f"{path}: record {record} (line {line}): not a usable JSON value: {err}") \
                from None
        yield Where(path, record, line), value
        pos = end


def number(obj: dict[str, Any], key: str, where: Where, default: float | None = None, *,
           positive: bool = False, prefix: str = "") -> float:
    """``obj[key]`` as a finite number (>= 0, or > 0 if ``positive``); ``default`` when absent."""
    if key not in obj or obj[key] is None:
        if default is None:
            raise where.error(prefix + key, "a number (the field is required)")
        return default
    v = obj[key]
    if isinstance(v, str):
        try:
            v = float(v)
        except ValueError:
            raise where.error(prefix + key, "a number", obj[key]) from None
    if isinstance(v, bool) or not isinstance(v, int | float) or v != v or v in (float("inf"), float("-inf")):
        raise where.error(prefix + key, "a number", obj[key])
    if v < 0 or (positive and v == 0):
        raise where.error(prefix + key, "a number > 0" if positive else "a number >= 0", v)
    return float(v)


def text_field(
    obj: dict[str, Any], key: str, where: Where, default: str | None = None, prefix: str = ""
) -> str:
    if key not in obj or obj[key] is None:
        if default is None:
            raise where.error(prefix + key, "a string (the field is required)")
        return default
    v = obj[key]
    if isinstance(v, int | float) and not isinstance(v, bool):
        return str(v)
    if not isinstance(v, str):
        raise where.error(prefix + key, "a string", v)
    return v


def as_object(value: Any, where: Where, what: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise where.error(what, "a JSON object", value)
    return value


def as_list(value: Any, where: Where, what: str) -> list[Any]:
    if not isinstance(value, list):
        raise where.error(what, "a JSON array", value)
    return value
