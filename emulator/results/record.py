"""How a run was made: ``scenario.toml`` (the resolved scenario) and ``run.json`` in its directory.

``scenario.toml`` is the scenario after every override, so that ``emulator rerun DIR`` needs
nothing but the directory. Secrets are never written: the RM's shared secret is resolved into
``rm.credentials`` when a scenario is loaded; the record keeps where it came from (a variable or a
file) and drops the secret itself.
"""

from __future__ import annotations

import json
import math
import os
import platform
import re
import subprocess
import sys
import tomllib
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from typing import Any, Literal

import msgspec

from emulator.scenario.schema import Scenario

SCENARIO_FILE = "scenario.toml"
RECORD_FILE = "run.json"
# Summary fields measured on the wall clock (real-time runs only): a rerun cannot reproduce them.
WALL_CLOCK_FIELDS = ("costs", "workers", "lag", "overloaded", "removals_in_stalls")
OMITTED = "<omitted>"
_SECRET_KEYS = frozenset({"rm.credentials"})


class Machine(msgspec.Struct, kw_only=True, frozen=True):
    cores: int | None
    python: str
    implementation: str
    platform: str


class RunRecord(msgspec.Struct, kw_only=True, frozen=True):
    """``run.json``: written when a run starts, completed (``wall_s``, ``exit_status``) when it ends."""

    command: Literal["run", "rm", "experiment"]
    scenario_file: str  # as given on the command line
    overrides: dict[str, Any]  # --set, --seed, --duration ... as dotted field paths (secrets omitted)
    adjustments: list[str]  # what the emulator changed on its own, e.g. a warm-up scaled to fit
    seed: int
    clock: str
    version: str
    commit: str  # `git describe` of the source tree, "unknown" when it is not a git checkout
    machine: Machine
    started_at: str  # ISO 8601, UTC
    check_invariants: bool = False
    served: bool = False  # on a status page, in paced real time whatever the scenario's clock
    secrets_omitted: list[str] = []
    wall_s: float | None = None
    exit_status: int | None = None


def emulator_version() -> str:
    try:
        return metadata.version("hbemu")
    except metadata.PackageNotFoundError:
        return "unknown"


def source_commit(root: Path | None = None) -> str:
    """``git describe`` of the tree the emulator runs from; "unknown" if that is not a git checkout
    (an installed wheel), git is missing or slow. Never raises."""
    root = root or Path(__file__).resolve().parents[2]
    try:
        top = subprocess.run(["git", "-C", str(root), "rev-parse", "--show-toplevel"], capture_output=True,
                             text=True, timeout=5, check=True).stdout.strip()
        # A site-packages inside some other checkout must not be described as that checkout.
        if Path(top).resolve() != root:
            return "unknown"
        described = subprocess.run(["git", "-C", str(root), "describe", "--always", "--tags"],
                                   capture_output=True, text=True, timeout=5, check=True).stdout.strip()
        # `describe --dirty` refreshes and writes the index: a run must not write into the checkout
        # (under a file-size limit a truncated index.lock was left behind). `status` without
        # optional locks compares the same files and writes nothing.
        changed = subprocess.run(["git", "--no-optional-locks", "-C", str(root), "status", "--porcelain",
                                  "--untracked-files=no"], capture_output=True, text=True, timeout=5,
                                 check=True).stdout.strip()
        return f"{described}-dirty" if changed else described
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def this_machine() -> Machine:
    return Machine(cores=os.cpu_count(), python=platform.python_version(),
                   implementation=sys.implementation.name, platform=platform.platform())


def redacted(overrides: dict[str, Any]) -> dict[str, Any]:
    return {k: OMITTED if k in _SECRET_KEYS else v for k, v in overrides.items()}


def _credential_source(source: Path, overrides: dict[str, Any]) -> tuple[str, str]:
    """Where the scenario's secret came from (loading it clears these two fields): a variable name
    and a file path, made absolute so that a rerun from another directory finds it."""
    try:
        raw = tomllib.loads(source.read_text(encoding="utf-8")).get("rm", {})
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
        raw = {}
    raw = raw if isinstance(raw, dict) else {}
    env = str(overrides.get("rm.credentials_env", raw.get("credentials_env", "")))
    file = str(overrides.get("rm.credentials_file", raw.get("credentials_file", "")))
    if file and not Path(file).is_absolute():
        file = str((source.parent / file).resolve())
    return env, file


def scenario_data(scenario: Scenario, source: Path, overrides: dict[str, Any]) -> tuple[dict[str, Any], bool]:
    """The scenario as plain data without its secret; True if a secret was left out that the
    record cannot point to (given inline, not by a variable or a file)."""
    data: dict[str, Any] = msgspec.to_builtins(scenario)
    rm = data["rm"]
    had_secret = bool(rm.get("credentials"))
    env, file = _credential_source(source, overrides)
    rm["credentials"], rm["credentials_env"], rm["credentials_file"] = "", env, file
    return data, had_secret and not (env or file)


def write_record(out: Path, record: RunRecord, scenario: dict[str, Any]) -> None:
    header = (f"# The resolved scenario of this run (its file {record.scenario_file} with every override).\n"
              "# `emulator rerun DIR` runs it again. Secrets are not written.\n")
    (out / SCENARIO_FILE).write_text(header + to_toml(scenario), encoding="utf-8")
    save(out, record)


def save(out: Path, record: RunRecord) -> None:
    (out / RECORD_FILE).write_bytes(msgspec.json.format(msgspec.json.encode(record)) + b"\n")


def load_record(out: Path) -> RunRecord:
    return msgspec.json.decode((out / RECORD_FILE).read_bytes(), type=RunRecord)


def now_iso() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


# --- a small TOML writer (the standard library reads TOML but does not write it) ---------------

_BARE = re.compile(r"^[A-Za-z0-9_-]+$")


def _key(k: str) -> str:
    return k if _BARE.match(k) else json.dumps(k)


def _value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        if math.isnan(v):
            return "nan"
        if math.isinf(v):
            return "inf" if v > 0 else "-inf"
        return repr(v)  # shortest text that reads back as the same float
    if isinstance(v, str):
        return json.dumps(v)  # JSON's escapes are a subset of a TOML basic string's
    if isinstance(v, list | tuple):
        return "[" + ", ".join(_value(x) for x in v if x is not None) + "]"
    if isinstance(v, dict):
        return "{ " + ", ".join(f"{_key(k)} = {_value(x)}" for k, x in v.items() if x is not None) + " }"
    raise TypeError(f"cannot write {type(v).__name__} as TOML")


def _is_table_array(v: Any) -> bool:
    return isinstance(v, list) and bool(v) and all(isinstance(x, dict) for x in v)


def to_toml(data: dict[str, Any], prefix: str = "") -> str:
    """Tables as ``[a.b]``, lists of tables as ``[[a.b]]``, anything inside those inline; None
    (TOML has no null) is left out, which is each optional field's default."""
    lines: list[str] = []
    nested: list[tuple[str, Any]] = []
    for k, v in data.items():
        if v is None:
            continue
        if isinstance(v, dict) or _is_table_array(v):
            nested.append((k, v))
        else:
            lines.append(f"{_key(k)} = {_value(v)}")
    text = "\n".join(lines) + ("\n" if lines else "")
    for k, v in nested:
        name = f"{prefix}.{_key(k)}" if prefix else _key(k)
        if isinstance(v, dict):
            text += f"\n[{name}]\n" + to_toml(v, name)
        else:
            for item in v:
                body = "\n".join(f"{_key(ik)} = {_value(iv)}" for ik, iv in item.items() if iv is not None)
                text += f"\n[[{name}]]\n" + body + ("\n" if body else "")
    return text
