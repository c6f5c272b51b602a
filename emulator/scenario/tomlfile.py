"""Experiment files that are not scenarios (E5's offline workloads): whether a TOML file holds a
given top-level table, and reading one into its struct with one error naming the file and field."""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import TypeVar

import msgspec

from emulator.scenario.loader import ScenarioError

T = TypeVar("T")


def has_table(path: Path, table: str) -> bool:
    """A TOML file whose top level has ``table`` (and can be read)."""
    try:
        return table in tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError, RecursionError):
        return False


def decode_file(path: Path, struct: type[T]) -> T:
    """The whole file as ``struct``; a bad one is one ScenarioError naming the file and field."""
    try:
        return msgspec.toml.decode(path.read_bytes(), type=struct)
    except FileNotFoundError as err:
        raise ScenarioError(f"{path}: no such file") from err
    except (msgspec.ValidationError, msgspec.DecodeError) as err:
        text = str(err).replace("`$.", "`")
        raise ScenarioError(f"{path}: {text}") from err
