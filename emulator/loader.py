"""Reading scenario files, with errors that name the file, the field path and what was expected."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path
from typing import Any

import msgspec

from emulator.scenario import Scenario


class ScenarioError(Exception):
    """A scenario file cannot be used; the message is meant for the user as-is."""


_AT = re.compile(r"^(?P<msg>.*?)(?: - at `\$(?P<path>[^`]*)`)?$", re.S)


def _explain(err: msgspec.ValidationError) -> str:
    m = _AT.match(str(err))
    assert m is not None
    msg, path = m.group("msg"), m.group("path")
    where = path.lstrip(".") if path else "(top level)"
    msg = msg[0].lower() + msg[1:] if msg else msg
    return f"at `{where}`: {msg}"


def scenario_from_dict(data: dict[str, Any], source: str = "<scenario>") -> Scenario:
    try:
        return msgspec.convert(data, Scenario, strict=True)
    except msgspec.ValidationError as err:
        raise ScenarioError(f"{source}: {_explain(err)}") from None


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
    for dotted, value in (overrides or {}).items():
        target = data
        *parents, leaf = dotted.split(".")
        for key in parents:
            target = target.setdefault(key, {})
        target[leaf] = value
    return scenario_from_dict(data, str(p))
