"""What every trace format is read into: jobs of task groups, and optionally the cluster.

A job's tasks are grouped by size (an operation has one demand vector); each task keeps its own
recorded duration. Errors name the file, the record (line) and the field; fields a reader does
not know are reported once each as warnings, not errors.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

MIB_PER_GIB = 1024.0


class TraceError(Exception):
    """A trace cannot be used; the message names the file, the record and the field."""


@dataclass
class TaskGroup:
    cpu: float
    ram_gib: float
    durations_s: list[float] = field(default_factory=list)


@dataclass
class TraceJob:
    job_id: str
    pool: str
    submit_s: float
    groups: list[TaskGroup]

    def add_task(self, cpu: float, ram_gib: float, duration_s: float) -> None:
        for g in self.groups:
            if g.cpu == cpu and g.ram_gib == ram_gib:
                g.durations_s.append(duration_s)
                return
        self.groups.append(TaskGroup(cpu, ram_gib, [duration_s]))

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


def read_text(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise TraceError(f"{path}: no such file") from None
    except (OSError, UnicodeDecodeError) as err:
        raise TraceError(f"{path}: cannot read: {err}") from None


def json_stream(path: Path) -> Iterator[tuple[Where, Any]]:
    """The JSON values of a file holding one or more of them one after another (as SLS and Rumen
    write them), with their record number and line."""
    text = read_text(path)
    decoder = json.JSONDecoder()
    pos = 0
    record = 0
    n = len(text)
    while True:
        while pos < n and text[pos].isspace():
            pos += 1
        if pos >= n:
            return
        record += 1
        line = text.count("\n", 0, pos) + 1
        try:
            value, end = decoder.raw_decode(text, pos)
        except json.JSONDecodeError as err:
            raise TraceError(f"{path}: record {record}: not valid JSON at line {err.lineno} column "
                             f"{err.colno}: {err.msg}") from None
        except RecursionError:
            raise TraceError(f"{path}: record {record} (line {line}): nested too deeply") from None
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
