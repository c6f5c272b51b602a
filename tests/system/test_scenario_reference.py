"""docs/scenario-reference.md is generated from the scenario structs (every field, its type, default
and comment), and `emulator schema` gives editors the same as a JSON Schema."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path
from typing import Any

import msgspec.inspect as mi
import pytest

from emulator.cli.main import main
from emulator.scenario.reference import REGENERATE, markdown
from emulator.scenario.schema import Scenario

ROOT = Path(__file__).parents[2]
REFERENCE = ROOT / "docs" / "scenario-reference.md"


def test_the_committed_reference_is_the_generated_one() -> None:
    assert REFERENCE.read_text(encoding="utf-8") == markdown(), f"stale: run {REGENERATE}"


def _field_names(t: Any, seen: set[type]) -> set[str]:
    if isinstance(t, mi.StructType):
        if t.cls in seen:
            return set()
        seen.add(t.cls)
        return {f.encode_name for f in t.fields} | {n for f in t.fields for n in _field_names(f.type, seen)}
    if isinstance(t, mi.UnionType):
        return {n for x in t.types for n in _field_names(x, seen)}
    if isinstance(t, mi.ListType | mi.VarTupleType):
        return _field_names(t.item_type, seen)
    return set()


def test_every_field_is_in_the_reference() -> None:
    text = markdown()
    names = _field_names(mi.type_info(Scenario), set())
    assert len(names) > 150
    missing = [n for n in names if f"| `{n}` |" not in text]
    assert not missing
    assert "design.md" not in text and "seeds/" not in text  # users have neither


def test_schema_prints_a_json_schema_the_shipped_scenarios_fit(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["schema"]) == 0
    schema = json.loads(capsys.readouterr().out)
    assert schema["$schema"].startswith("https://json-schema.org/")
    top = schema["$defs"]["Scenario"]
    assert top["required"] == ["cluster", "run"]
    for path in sorted((ROOT / "scenarios").glob("*.toml")):
        data = tomllib.loads(path.read_text(encoding="utf-8"))
        if "cluster" in data:  # (an E5 workload file is not a scenario)
            assert set(data) <= set(top["properties"]), path.name
    assert main(["schema", "--markdown"]) == 0
    assert capsys.readouterr().out == markdown()


def test_the_misspelt_field_error_in_usage_md_is_what_validate_prints(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    Path("my.toml").write_text("[cluster]\nnodes = [{ count = 2, cpus = 8, ram_gib = 16 }]\n"
                               "[run]\nduration_s = 60\n")
    assert main(["validate", "my.toml"]) == 2
    line = capsys.readouterr().err.strip()
    assert line.startswith("error: my.toml: at `cluster.nodes[0].cpus`: unknown field; did you mean `cpu`?")
    assert f"\n{line}\n" in (ROOT / "docs" / "usage.md").read_text(encoding="utf-8")
