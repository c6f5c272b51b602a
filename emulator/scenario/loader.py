"""Reading scenario files, with errors that name the file, the field path and what was expected."""

from __future__ import annotations

import difflib
import re
import sys
import tomllib
import types
import typing
from pathlib import Path
from typing import Any

import msgspec

from emulator.scenario.checks import first_problem
from emulator.scenario.credentials import CredentialsError, resolve_credentials
from emulator.scenario.schema import Scenario, TraceConfig
from rm import SERVICE_TIME_PRESETS


class ScenarioError(Exception):
    """A scenario file cannot be used; the message is meant for the user as-is."""


_AT = re.compile(r"^(?P<msg>.*?)(?: - at `\$(?P<path>[^`]*)`)?$", re.S)


def _field_type(path: str) -> Any:
    """The declared type at a msgspec error path like ``.scheduler.policy`` or ``.faults[0].kind``;
    a tag field of a union of structs comes back as ``Literal[tags...]``."""
    t: Any = Scenario
    for part in re.findall(r"\.([A-Za-z_]\w*)|\[\d+\]", path):
        t = _unwrap(t)
        if not part:  # an index into a list
            args = typing.get_args(t)
            t = args[0] if args else None
            continue
        members = t if isinstance(t, list) else [t]
        if not all(isinstance(m, type) and issubclass(m, msgspec.Struct) for m in members):
            return None
        cfg = members[0].__struct_config__
        if part == cfg.tag_field:
            return typing.Literal[tuple(m.__struct_config__.tag for m in members)]
        hints = typing.get_type_hints(members[0], include_extras=True)
        if part not in hints:
            return None
        t = hints[part]
    return _unwrap(t)


def _unwrap(t: Any) -> Any:
    while typing.get_origin(t) is typing.Annotated:
        t = typing.get_args(t)[0]
    args = typing.get_args(t)
    if typing.get_origin(t) in (typing.Union, types.UnionType):
        structs = [a for a in args if isinstance(a, type) and issubclass(a, msgspec.Struct)]
        if len(structs) > 1:
            return structs
        rest = [a for a in args if a is not type(None)]
        if len(rest) == 1:
            return _unwrap(rest[0])
    return t


def _choices(path: str) -> str:
    t = _field_type(path)
    if typing.get_origin(t) is typing.Literal:
        return "expected one of " + ", ".join(f"`{v}`" for v in typing.get_args(t))
    return ""


def _explain(err: msgspec.ValidationError) -> str:
    m = _AT.match(str(err))
    assert m is not None
    msg, path = m.group("msg"), m.group("path")
    where = path.lstrip(".") if path else "(top level)"
    msg = msg[0].lower() + msg[1:] if msg else msg
    if path and msg.startswith(("invalid enum value", "invalid value")):
        choices = _choices(path)
        if choices:
            msg = f"{msg}; {choices}"
    unknown = _UNKNOWN.match(msg)
    if unknown:
        return _printable(_unknown_field(path or "", unknown.group(1)))
    return _printable(f"at `{where}`: {msg}")


_UNKNOWN = re.compile(r"^object contains unknown field `(.*)`$", re.S)


def _unknown_field(path: str, name: str) -> str:
    """``at `cluster.nodes[0].cpus`: unknown field; did you mean `cpu`? (expected one of ...)``."""
    where = f"{path.lstrip('.')}.{name}" if path.lstrip(".") else name
    t = _field_type(path) if path else Scenario
    members = t if isinstance(t, list) else [t]
    fields = sorted({f for m in members if isinstance(m, type) and issubclass(m, msgspec.Struct)
                     for f in m.__struct_fields__})
    if not fields:
        return f"at `{where}`: unknown field"
    close = difflib.get_close_matches(name, fields, n=1, cutoff=0.6)
    hint = f"; did you mean `{close[0]}`?" if close else ""
    return f"at `{where}`: unknown field{hint} (expected one of {', '.join(f'`{f}`' for f in fields)})"


def _printable(text: str) -> str:
    """One line, whatever odd key names the file contains."""
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


def scenario_from_dict(
    data: dict[str, Any], source: str = "<scenario>", base_dir: Path | None = None,
    machine_bytes: int | None = None,
) -> Scenario:
    """``base_dir``: where a relative ``rm.credentials_file`` is (default: the current directory);
    ``machine_bytes``: the memory the run must fit in (default: what this machine has available)."""
    data = _expand_queues(_expand_trace(data, source, base_dir), source, base_dir)
    data = _expand_service_time(data, source)
    try:
        scenario = msgspec.convert(data, Scenario, strict=True)
    except msgspec.ValidationError as err:
        raise ScenarioError(f"{source}: {_explain(err)}") from None
    except RecursionError:
        raise ScenarioError(f"{source}: values nested too deeply") from None
    problem = first_problem(scenario, machine_bytes)
    if problem is not None:
        raise ScenarioError(f"{source}: {_printable(f'at `{problem.path}`: {problem.message}')}")
    try:
        return resolve_credentials(scenario, base_dir)
    except CredentialsError as err:
        raise ScenarioError(f"{source}: {err}") from None


def _expand_service_time(data: dict[str, Any], source: str) -> dict[str, Any]:
    """``[rm] service_time = "NAME"``: a named service-time model becomes its table of costs (so the
    resolved scenario a run records replays without the name)."""
    rm = data.get("rm")
    if not isinstance(rm, dict) or not isinstance(rm.get("service_time"), str):
        return data
    name = rm["service_time"]
    preset = SERVICE_TIME_PRESETS.get(name)
    if preset is None:
        names = ", ".join(f"`{n}`" for n in SERVICE_TIME_PRESETS)
        raise ScenarioError(_printable(f"{source}: at `rm.service_time`: unknown service-time model "
                                       f"`{name}`; expected a table of costs or one of {names}"))
    return {**data, "rm": {**rm, "service_time": msgspec.to_builtins(preset)}}


def _expand_trace(data: dict[str, Any], source: str, base_dir: Path | None) -> dict[str, Any]:
    """``[workload.trace]``: the trace's jobs become operations after those of the file (the table
    is replaced by them, so the resolved scenario a run records replays without the trace)."""
    workload = data.get("workload")
    if isinstance(workload, dict) and "trace" in workload and workload["trace"] is None:
        return {**data, "workload": {k: v for k, v in workload.items() if k != "trace"}}  # no trace
    if not isinstance(workload, dict) or "trace" not in workload:
        return data
    from emulator.scenario.traces.convert import operations, read_trace
    from emulator.scenario.traces.model import TraceError

    try:
        cfg = msgspec.convert(workload["trace"], TraceConfig, strict=True)
    except msgspec.ValidationError as err:
        m = _AT.match(str(err))
        assert m is not None
        where = "workload.trace" + (m.group("path") or "")
        msg = m.group("msg")
        msg = msg[0].lower() + msg[1:] if msg else msg
        choices = _choices(where.replace("workload.trace", ".workload.trace", 1))
        msg += f"; {choices}" if choices else ""
        raise ScenarioError(_printable(f"{source}: at `{where}`: {msg}")) from None
    path = Path(cfg.path)
    if not path.is_absolute():
        path = (base_dir or Path.cwd()) / path
    try:
        trace = read_trace(cfg, path, base_dir=base_dir)
    except TraceError as err:
        raise ScenarioError(f"{source}: at `workload.trace`: {err}") from None
    for warning in trace.warnings:
        print(f"warning: {warning}", file=sys.stderr)
    ops = workload.get("operations", [])
    ops = ops if isinstance(ops, list) else []
    taken = {o.get("name") for o in ops if isinstance(o, dict)}
    added = operations(trace, cfg, {n for n in taken if isinstance(n, str)})
    if not added:
        raise ScenarioError(f"{source}: at `workload.trace`: no job of {path} in the window "
                            "(`start_s`, `span_s`); expected at least one")
    expanded = {k: v for k, v in workload.items() if k != "trace"}
    expanded["operations"] = [*ops, *added]
    return {**data, "workload": expanded}


def _expand_queues(data: dict[str, Any], source: str, base_dir: Path | None) -> dict[str, Any]:
    """``[workload] queues_file``: a fair-scheduler.xml's queues become ``[[workload.pools]]`` (and
    root's policy ``scheduler.policy`` unless the file sets one); the key is replaced by them."""
    workload = data.get("workload")
    if not isinstance(workload, dict) or not isinstance(workload.get("queues_file"), str):
        return data
    from emulator.scenario.traces import queues
    from emulator.scenario.traces.model import TraceError

    path = Path(workload["queues_file"])
    if not path.is_absolute():
        path = (base_dir or Path.cwd()) / path
    out = {**data, "workload": {k: v for k, v in workload.items() if k != "queues_file"}}
    try:
        warnings = queues.apply(out, queues.read(path, queues.cluster_total(data)), path)
    except TraceError as err:
        raise ScenarioError(f"{source}: at `workload.queues_file`: {err}") from None
    for warning in warnings:
        print(f"warning: {warning}", file=sys.stderr)
    return out


def load_scenario(path: str | Path, overrides: dict[str, Any] | None = None) -> Scenario:
    """Load and validate ``path``; ``overrides`` maps dotted field paths to values."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ScenarioError(f"{p}: no such file") from None
    except (OSError, UnicodeDecodeError) as err:
        raise ScenarioError(f"{p}: cannot read: {err}") from None
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as err:
        raise ScenarioError(f"{p}: not valid TOML: {err}") from None
    except RecursionError:
        raise ScenarioError(f"{p}: not valid TOML: arrays or tables nested too deeply") from None
    apply_overrides(data, overrides or {}, p)
    return scenario_from_dict(data, str(p), p.parent)


def with_overrides(scenario: Scenario, overrides: dict[str, Any], source: str,
                   base_dir: Path | None = None) -> Scenario:
    """``scenario`` with dotted field paths changed (``--set`` on a loaded scenario), checked again."""
    if not overrides:
        return scenario
    data: dict[str, Any] = msgspec.to_builtins(scenario)
    apply_overrides(data, overrides, Path(source))
    return scenario_from_dict(data, source, base_dir)


def apply_overrides(data: dict[str, Any], overrides: dict[str, Any], source: Path) -> None:
    """Set each dotted field path of ``overrides`` in the scenario's plain data, in place."""
    for dotted, value in overrides.items():
        _override(data, dotted, value, source)


_INDEX = re.compile(r"\[(\d+)\]")


def _override(data: dict[str, Any], dotted: str, value: Any, source: Path) -> None:
    """Set ``a.b.0.c = value`` (or ``a.b[0].c``, as errors print paths): tables by key (created
    if missing), arrays by index."""
    target: Any = data
    *parents, leaf = _INDEX.sub(r".\1", dotted).split(".")
    for depth, key in enumerate([*parents, leaf]):
        where = ".".join([*parents, leaf][: depth + 1])
        if isinstance(target, list):
            if not key.isdigit() or int(key) >= len(target):
                raise ScenarioError(
                    f"{source}: --set {dotted}: `{where}` must index the array (0..{len(target) - 1})"
                )
            index: Any = int(key)
        elif isinstance(target, dict):
            index = key
        else:
            raise ScenarioError(f"{source}: --set {dotted}: `{where}` is inside a value, not a table")
        if depth == len(parents):
            target[index] = value
        else:
            if isinstance(target, dict) and key not in target:
                target[key] = {}
            target = target[index]
