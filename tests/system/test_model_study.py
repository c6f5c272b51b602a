"""Model studies (`model = NAME` instead of a scenario): the model's parameters validated with the
file and field path, overridden by variants and axes, each point run and kept in the study's JSON,
resumed, and rendered by the model's own tables."""

from __future__ import annotations

from pathlib import Path

import msgspec
import pytest

from emulator.cli.main import main
from emulator.study.modelpoints import apply_params
from emulator.study.output import read_output
from emulator.study.points import expand
from emulator.study.runner import StudyRun
from emulator.study.spec import StudyError
from emulator.study.tables import model_table

# E5's offline packing, small: 60 tasks of one group, two SLOs.
TINY = """
name = "tiny-sbp"
model = "sbp-offline"

[params]
tasks = 60
history_samples = 100
test_samples = 200
slos = [0.9, 0.99]
methods = ["request", "gpa-g"]
bin_tasks = 10
[[params.groups]]
share = 1.0
size_min = 0.05
size_max = 0.15
usage = { kind = "normal", mean = 0.6, cv = 0.3 }

[[variants]]
name = "gpa"
description = "by requests and gpa-g"

[[variants]]
name = "av"
set = { methods = ["av"], av_factors = [1.25] }

[axes]
seed = [2]

[[tables]]
render = "methods"
"""


def _tiny(tmp_path: Path, text: str = TINY) -> Path:
    path = tmp_path / "tiny.toml"
    path.write_text(text, encoding="utf-8")
    return path


def test_a_model_study_runs_its_points_resumes_and_renders_the_models_table(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    study, out = _tiny(tmp_path), tmp_path / "out.json"
    assert main(["study", str(study), "--out", str(out), "--jobs", "1", "--quiet"]) == 0
    printed = capsys.readouterr().out
    points = read_output(out).points
    assert [p.key for p in points] == ["gpa|seed=2", "av|seed=2"]
    gpa, av = points
    # The parameters as run: the study's, the variant's override and the seed axis, defaults filled in.
    assert gpa.params["seed"] == 2 and gpa.params["methods"] == ["request", "gpa-g"]
    assert av.params["methods"] == ["av"] and av.params["av_factors"] == [1.25]
    assert gpa.params["sample_interval_s"] == 60.0 and gpa.scenario == {} and gpa.metrics == {}
    assert {r["method"] for r in gpa.output["rows"]} == {"request", "gpa-g"}
    assert {r["method"] for r in av.output["rows"]} == {"av 1.25"}
    assert gpa.output["baselines"]["rows"][0]["workload"] == "e5 requests"
    # The model's table, once per point (two variants), each under its label.
    assert "**by requests and gpa-g, seed 2**" in printed and "**av, seed 2**" in printed
    assert "| gpa-g | " in printed and "| av 1.25 | " in printed
    assert model_table("sbp-offline", "baselines")(msgspec.json.decode(out.read_bytes())).count(
        "| e5 requests | 60 |") == 2
    # Resumed: nothing to run; a changed parameter runs that variant's point again.
    assert StudyRun(study, out, say=lambda _: None).todo == []
    changed = _tiny(tmp_path, TINY.replace("av_factors = [1.25]", "av_factors = [2.0]"))
    assert [p.key for p in StudyRun(changed, out, say=lambda _: None).todo] == ["av|seed=2"]
    # Another model's figure does not read this output.
    with pytest.raises(StudyError, match="not of model 'sbp-cluster'"):
        model_table("sbp-cluster", "methods")(msgspec.json.decode(out.read_bytes()))


@pytest.mark.parametrize(("change", "message"), [
    (('model = "sbp-offline"', 'model = "sbp-ofline"'),
     "at `model`: unknown model `sbp-ofline`; did you mean `sbp-offline`?"),
    (('model = "sbp-offline"', ""), "at `scenario`: a study runs a base scenario (`scenario = FILE`) or a "
     "model (`model = NAME`;"),
    (("bin_tasks = 10", "bin_task = 10"),
     "at `params.bin_task`: unknown field; did you mean `bin_tasks`? (expected one of `seed`,"),
    (("cv = 0.3 }", "cv = 0.3, kindd = 1 }"), "at `params.groups[0].usage.kindd`: unknown field"),
    (("size_max = 0.15", "size_max = 0.01"), "at `params.groups[0]`: `size_max` must be >= `size_min`"),
    (("tasks = 60", "tasks = 1"), "at `params.tasks`: expected `int` >= 2"),
    (('set = { methods = ["av"]', 'set = { methods = ["avg"]'),
     "point `av|seed=2` (from `variants[1].set`): at `params.methods[0]`: `avg` is not a choice; did you "
     "mean `av`? (expected one of `av`, `cantelli`,"),
    (("seed = [2]", "seed = [2]\nbin_tasks = [10, 0]"),
     "point `gpa|seed=2|bin_tasks=0` (from `axes.bin_tasks`): at `params.bin_tasks`: expected `int` >= 1"),
    (('set = { methods', 'set = { "methods.x" = 1, methods'),
     "at `variants[1].set`: `methods` is a value, not a table of parameters"),
    (('render = "methods"', 'render = "method"'),
     "at `tables[0].render`: `method` is not a table of model `sbp-offline`; did you mean `methods`?"),
    (('render = "methods"', 'title = "x"'), "at `tables[0].render`: (expected one of `methods`,"),
    (('name = "tiny-sbp"', 'name = "tiny-sbp"\nmetrics = ["h1"]'), "at `metrics`: a model has no registry "
     "metrics"),
    (("seed = [2]", "seed = [2]\nnodes = [10]"), "at `axes.nodes`: a model has no cluster to scale"),
    (('name = "av"', 'name = "av"\nscenario = "x.toml"'), "at `variants[1].scenario`: a model study's "
     "variants change its `params`"),
])
def test_a_bad_model_study_is_one_clear_error(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                              change: tuple[str, str], message: str) -> None:
    text = TINY.replace(*change)
    assert text != TINY
    study = _tiny(tmp_path, text)
    assert main(["study", str(study), "--out", str(tmp_path / "out.json")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"error: {study}: {message}"), err
    assert "\n" not in err and not (tmp_path / "out.json").exists()


def test_a_scenario_study_takes_no_model_parameters(tmp_path: Path,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    study = _tiny(tmp_path, 'scenario = "x.toml"\nmetrics = ["h1"]\nparams = { tasks = 3 }\n')
    assert main(["study", str(study)]) == 2
    assert "at `params`: a model study's parameters" in capsys.readouterr().err


def test_dotted_overrides_make_the_tables_they_name() -> None:
    data = {"demand": {"ar_rho": 0.9}, "tasks": 3}
    assert apply_params(data, {"demand.ar_rho": 0.5, "demand.cpu_size.sigma": 1.0, "tasks": 4}) is None
    assert data == {"demand": {"ar_rho": 0.5, "cpu_size": {"sigma": 1.0}}, "tasks": 4}
    assert apply_params(data, {"tasks.x": 1}) == "tasks"


@pytest.mark.parametrize(("name", "points"), [("e4", 24), ("e5", 1), ("e5-cluster", 3)])
def test_the_committed_model_studies_expand_to_what_their_outputs_hold(name: str, points: int) -> None:
    """E4 is 3 seeds × the cell and its 7 variants; E5 one seed; E5 on trace-like demand 3 seeds."""
    root = Path(__file__).resolve().parents[2]
    run = StudyRun(root / "scenarios" / "studies" / f"{name}.toml", root / "docs" / f"{name}.json",
                   say=lambda _: None)
    assert len(expand(run.study)) == points
    assert run.todo == []


def test_a_model_study_has_no_run_directories(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    study = _tiny(tmp_path)
    assert main(["study", str(study), "--runs", str(tmp_path / "runs")]) == 2
    assert capsys.readouterr().err.strip() == (f"error: {study}: a model study's points are not emulator "
                                               "runs: no --runs")
