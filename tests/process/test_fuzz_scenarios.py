"""Property-based fuzzing of the scenario schema: any input is either a valid scenario or one clear
ScenarioError naming the file; nothing else ever escapes."""

from __future__ import annotations

import math
import tomllib
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from emulator.experiments import fuzz as fz
from emulator.experiments.fuzz import KEYS, field_mutations, mutate, to_toml, values
from emulator.scenario.loader import ScenarioError, load_scenario, scenario_from_dict

BASE = tomllib.loads(fz.base_text())


def accepts_or_explains(data: Any) -> None:
    try:
        sc = scenario_from_dict(data, "fuzz.toml")
    except ScenarioError as err:
        text = str(err)
        assert text.startswith("fuzz.toml: at `"), text
        assert "\n" not in text.strip() or "TOML" in text
        return
    # A valid scenario must hold the bounds the runner relies on.
    numbers = [sc.run.duration_s, sc.run.warmup_s, sc.run.speed, sc.heartbeat.interval_s, sc.rm.expiry_s]
    numbers += [o.seconds_mean for o in sc.workload.operations if o.seconds_mean is not None]
    assert all(math.isfinite(x) and x >= 0 for x in numbers)
    assert sc.run.duration_s > 0
    assert all(g.count >= 1 for g in sc.cluster.nodes)


# Breadth per CI run; `emulator fuzz --examples N` goes deeper.
@settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.dictionaries(st.sampled_from(KEYS), values, max_size=6))
def test_random_documents(doc: dict[str, Any]) -> None:
    accepts_or_explains(doc)


@settings(max_examples=600, deadline=None)
@given(st.lists(st.sampled_from(KEYS), min_size=1, max_size=4), values)
def test_mutations_of_a_valid_scenario(path: list[str], value: Any) -> None:
    accepts_or_explains(mutate(BASE, path, value))


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=200))
def test_random_file_text(tmp_path_factory: Any, text: str) -> None:
    p = tmp_path_factory.mktemp("fz") / "f.toml"
    p.write_text(text, encoding="utf-8")
    try:
        load_scenario(p)
    except ScenarioError as err:
        assert str(err).startswith(f"{p}: ")


@settings(max_examples=200, deadline=None)
@given(field_mutations(BASE))
def test_fields_of_a_valid_scenario_set_near_their_bounds(doc: Any) -> None:
    accepts_or_explains(doc)


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(st.sampled_from(KEYS), values, max_size=6))
def test_documents_written_as_toml_read_back_the_same(doc: dict[str, Any]) -> None:
    """The fuzzer's TOML writer loses nothing but nulls (TOML has none) and keeps NaN."""
    back = tomllib.loads(to_toml(doc))
    assert set(back) == {k for k, v in doc.items() if v is not None}


def test_the_fuzz_command_loads_and_runs_inputs_with_no_crash(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from emulator.cli import main as cli

    # One fuzz run, through the command, whose report is kept to look into (not a second run).
    reports: list[fz.FuzzReport] = []
    real = fz.fuzz

    def kept(*args: Any, **kwargs: Any) -> fz.FuzzReport:
        reports.append(real(*args, **kwargs))
        return reports[-1]

    monkeypatch.setattr(fz, "fuzz", kept)
    assert cli.main(["fuzz", "--examples", "150", "--seed", "3"]) == 0
    out = capsys.readouterr().out
    assert "inputs tried 150: valid runs " in out and "crashes 0" in out
    (report,) = reports
    assert report.crashes == 0 and report.inputs == 150
    assert report.valid_runs > 0 and report.clear_errors > 100  # both paths exercised
    assert {"bytes", "text", "text-edit", "document-toml", "mutation-json"} <= set(report.by_kind)


def test_the_fuzz_command_reports_a_crash_and_exits_1(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from emulator.cli import main as cli

    real = fz.load_scenario  # type: ignore[attr-defined]  # the name the fuzzer calls

    def buggy(path: Path) -> Any:
        if b"cluster" in path.read_bytes():  # a loader bug on some inputs
            raise KeyError("oops")
        return real(path)

    monkeypatch.setattr(fz, "load_scenario", buggy)
    args = ["fuzz", "--examples", "200", "--seed", "3", "--no-run", "--keep-failures", str(tmp_path)]
    code = cli.main(args)
    out = capsys.readouterr().out
    assert code == 1
    assert "KeyError: 'oops'" in out and "crashes 0" not in out
    assert list(tmp_path.iterdir())  # the crashing inputs are kept to reproduce them


def test_a_seed_gives_the_same_inputs_whatever_was_imported_first() -> None:
    """Hypothesis draws constants from the loaded local modules: without the fuzzer importing the
    whole project first, a process that imported the CLI (or ran a scenario) first got other inputs
    from the same seed (100 inputs show it: their digests differ without that import)."""
    import subprocess
    import sys

    program = ("import sys\n{first}\nfrom emulator.experiments.fuzz import fuzz\n"
               "print(fuzz(100, seed=0, run_valid=False).summary()['inputs_digest'])\n")
    digests = set()
    for first in ("", "import emulator.cli.main, emulator.web.app"):
        out = subprocess.run([sys.executable, "-c", program.format(first=first)], capture_output=True,
                             text=True, timeout=120, check=True).stdout
        digests.add(out.strip())
    assert len(digests) == 1, digests
