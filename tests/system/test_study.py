"""`emulator study`: a study file's points run into one JSON, resumed without re-running done
points, rendered as tables from the JSON alone; a bad study file is one clear error."""

from __future__ import annotations

from pathlib import Path

import msgspec
import pytest

from emulator.cli.figure_table import FIGURES
from emulator.cli.main import main
from emulator.experiments.e1 import SEEDS
from emulator.experiments.e1study import e1_grid
from emulator.experiments.e1tables import DEFAULT_POLICIES, POLICIES, PREEMPTION
from emulator.results.figures import stale
from emulator.results.record import load_record
from emulator.scenario.loader import load_scenario
from emulator.study.points import Resolver, expand
from emulator.study.runner import StudyRun, only_writer, read_output, run_point
from emulator.study.spec import StudyError, load_study
from emulator.study.tables import markdown

ROOT = Path(__file__).resolve().parents[2]
QUICKSTART = ROOT / "scenarios" / "quickstart.toml"

TINY = f"""
name = "tiny"
scenario = "{QUICKSTART}"
set = {{ "run.duration_s" = 120, "run.warmup_s" = 30 }}
metrics = ["heartbeats_sent", "cpu_utilization", "h1"]

[[variants]]
name = "periodic"
set = {{ heartbeat.mode = "periodic" }}

[[variants]]
name = "delta"
set = {{ "heartbeat.mode" = "delta" }}

[axes]
seed = [1, 2]

[[tables]]
title = "tiny"
"""


def _tiny(tmp_path: Path, text: str = TINY) -> Path:
    path = tmp_path / "tiny.toml"
    path.write_text(text, encoding="utf-8")
    return path


def test_a_study_runs_resumes_and_renders_its_table(tmp_path: Path) -> None:
    study, out = _tiny(tmp_path), tmp_path / "out.json"
    lines: list[str] = []
    StudyRun(study, out, say=lines.append).run()
    first = read_output(out)
    assert [p.key for p in first.points] == ["periodic|seed=1", "periodic|seed=2", "delta|seed=1",
                                             "delta|seed=2"]
    by_key = {p.key: p for p in first.points}
    # The exact scenario as run, overrides applied; delta heartbeats send fewer of them.
    assert by_key["delta|seed=2"].scenario["heartbeat"]["mode"] == "delta"
    assert by_key["delta|seed=2"].scenario["run"]["seed"] == 2
    assert by_key["delta|seed=2"].scenario["run"]["duration_s"] == 120
    sent_by = {key: p.metrics["heartbeats_sent"] for key, p in by_key.items()}
    assert sent_by["delta|seed=1"] < sent_by["periodic|seed=1"]
    assert set(by_key["periodic|seed=1"].metrics) == {"heartbeats_sent", "cpu_utilization", "h1"}

    # Interrupted after three points: the fourth is the only one run again.
    doc = msgspec.json.decode(out.read_bytes())
    doc["points"] = [p for p in doc["points"] if p["key"] != "delta|seed=1"]
    out.write_bytes(msgspec.json.encode(doc))
    lines.clear()
    resumed = StudyRun(study, out, say=lines.append)
    assert [p.key for p in resumed.todo] == ["delta|seed=1"]
    resumed.run()
    assert [line for line in lines if line.startswith("[")] == [lines[-1]]
    again = {p.key: p for p in read_output(out).points}
    assert again["delta|seed=1"].metrics == by_key["delta|seed=1"].metrics  # virtual time: the same
    assert again["periodic|seed=1"].wall_s == by_key["periodic|seed=1"].wall_s  # kept, not re-run

    # A changed override changes the exact scenario of that variant's points: they run again.
    _tiny(tmp_path, TINY.replace('heartbeat.mode = "periodic"', 'heartbeat.mode = "periodic", '
                                 'heartbeat.interval_s = 2.0'))
    assert [p.key for p in StudyRun(study, out, say=lines.append).todo] == ["periodic|seed=1",
                                                                            "periodic|seed=2"]

    table = markdown(read_output(out))
    assert "| variant | heartbeats sent | CPU utilisation | h1 (min m_i/n_i) |" in table
    delta = next(r for r in table.splitlines() if r.startswith("| delta |"))
    sent = [by_key[f"delta|seed={s}"].metrics["heartbeats_sent"] for s in (1, 2)]
    assert sent[0] != sent[1]
    assert delta.split(" | ")[1] == f"{sum(sent) / 2:,.0f} ± {abs(sent[0] - sent[1]) / 2 ** 0.5:,.0f}"
    assert "mean ± sd over seed 1, 2" in table


def test_the_command_runs_points_in_processes_and_prints_tables_from_the_json(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    text = TINY.replace("seed = [1, 2]", "seed = [3]")
    text = text.replace('"run.duration_s" = 120', '"run.duration_s" = 60')
    study, out, runs = _tiny(tmp_path, text), tmp_path / "out.json", tmp_path / "runs"
    assert main(["study", str(study), "--out", str(out), "--jobs", "2", "--quiet", "--runs", str(runs)]) == 0
    printed = capsys.readouterr().out
    points = read_output(out).points
    assert [p.key for p in points] == ["periodic|seed=3", "delta|seed=3"]
    assert main(["study", "--table", str(out)]) == 0
    assert capsys.readouterr().out == printed
    # --runs: each point's full results and run record (what `emulator rerun DIR` takes).
    point_dir = runs / "delta-seed=3"
    summary = msgspec.json.decode((point_dir / "summary.json").read_bytes())
    assert summary["heartbeats_sent"] == points[1].metrics["heartbeats_sent"]
    assert load_record(point_dir).exit_status == 0
    as_run = msgspec.to_builtins(load_scenario(point_dir / "scenario.toml"))
    assert msgspec.json.decode(msgspec.json.encode(as_run)) == points[1].scenario


@pytest.mark.parametrize(("change", "message"), [
    (('"cpu_utilization"', '"cpu_utilisation"'),
     "tiny.toml: at `metrics[1]`: unknown metric `cpu_utilisation`; did you mean `cpu_utilization`?"),
    (('name = "delta"', 'name = "delta"\nsett = 1'),
     "tiny.toml: at `variants[1].sett`: unknown field; did you mean `set`?"),
    (('"heartbeat.mode" = "delta"', '"heartbeat.mode" = "deltaa"'),
     "tiny.toml: point `delta|seed=1` (from `variants[1].set`): "),
    (("seed = [1, 2]", "seed = [1, 1]"), "tiny.toml: at `axes.seed`: a value is given twice"),
    (('title = "tiny"', 'rows = "seeds"'),
     "tiny.toml: at `tables[0].rows`: `seeds` is not a dimension of the study; did you mean `seed`?"),
    (('name = "delta"', 'name = "periodic"'), "tiny.toml: at `variants[1].name`: `periodic` is the name"),
    (("metrics = [", "metrics = 3 #["), "tiny.toml: at `metrics`: expected `array`, got `int`"),
    (('title = "tiny"', "where = { seed = 3 }"),
     "tiny.toml: at `tables[0].where.seed`: 3 is not one of its values"),
])
def test_a_bad_study_file_is_one_clear_error(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                              change: tuple[str, str], message: str) -> None:
    text = TINY.replace(*change)
    assert text != TINY
    study = _tiny(tmp_path, text)
    assert main(["study", str(study), "--out", str(tmp_path / "out.json")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"error: {study.parent}/{message}"), err
    assert "\n" not in err


STUDIES = sorted((ROOT / "scenarios" / "studies").glob("*.toml"))


@pytest.mark.parametrize("path", STUDIES, ids=lambda p: p.stem)
def test_the_committed_studies_resolve(path: Path) -> None:
    """Each variant's first and last point (every axis at both ends) is a valid scenario."""
    study = load_study(path)
    resolver, points = Resolver(study, path), expand(study)
    for variant in {p.variant for p in points}:
        mine = [p for p in points if p.variant == variant]
        for point in (mine[0], mine[-1]):
            resolver.scenario(point)


def test_an_output_that_is_not_a_study_is_refused(tmp_path: Path) -> None:
    bogus = tmp_path / "out.json"
    bogus.write_text('{"runs": []}', encoding="utf-8")
    with pytest.raises(StudyError, match="not the output of `emulator study`"):
        StudyRun(_tiny(tmp_path), bogus)


def test_the_docs_sample_is_the_committed_study_and_its_output_still_reproduces() -> None:
    doc = (ROOT / "docs" / "studies.md").read_text(encoding="utf-8")
    marker = "<!-- study file: scenarios/studies/quickstart-heartbeats.toml -->\n```toml\n"
    shown = doc[doc.index(marker) + len(marker):].split("```", 1)[0]
    study_file = ROOT / "scenarios" / "studies" / "quickstart-heartbeats.toml"
    assert shown == study_file.read_text(encoding="utf-8")
    assert stale(FIGURES, ROOT / "docs" / "studies.md", ROOT) == [], (
        "run: emulator figures --write docs/studies.md")
    # The committed output is what the study gives now: one point run again (virtual time).
    committed = read_output(ROOT / "docs" / "study-quickstart-heartbeats.json")
    run = StudyRun(study_file, ROOT / "docs" / "study-quickstart-heartbeats.json", say=lambda _: None)
    point = next(p for p in run.points if p.key == "delta|seed=1")
    stored = next(p for p in committed.points if p.key == point.key)
    assert stored.scenario == msgspec.json.decode(msgspec.json.encode(run.data[point.key]))
    assert run_point(*run.point_args(point))[0] == stored.metrics


@pytest.mark.parametrize("name", ["e1-explore", "e1-seeds20"])
def test_the_e1_studies_are_the_grids_of_the_committed_e1_files(name: str) -> None:
    """`emulator e1 --study` regenerates these files: the study names their very runs."""
    committed = msgspec.json.decode((ROOT / "docs" / f"{name}.json").read_bytes())
    grid = e1_grid(ROOT / "scenarios" / "studies" / f"{name}.toml", POLICIES)
    assert grid.scenario == ROOT / committed["scenario"]
    runs = {(r["policy"], r["preemption"], r["seed"]) for r in committed["runs"]}
    assert runs == {(p, pre, s) for p in (*grid.policies, *grid.variants) for pre in grid.preemption
                    for s in grid.seeds}
    assert list(grid.seeds) == committed["seeds"]
    assert grid.variants == committed["variants"] and list(grid.variants) == list(committed["variants"])


def test_e1_refuses_a_study_it_cannot_run(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    study = _tiny(tmp_path)  # heartbeat variants, no packing policy named as E1 names them
    where = ["--out", str(tmp_path / "runs"), "--json", str(tmp_path / "e1.json")]
    assert main(["e1", "--study", str(study), "--seeds", "1", *where]) == 2
    assert "--seeds: not with --study" in capsys.readouterr().err
    study.write_text(TINY.replace('name = "delta"', 'name = "fit"'), encoding="utf-8")
    assert main(["e1", "--study", str(study), *where]) == 2
    assert "at `variants[1].set`: `fit` is E1's name for" in capsys.readouterr().err


def test_the_e1_study_is_what_make_e1_runs() -> None:
    grid = e1_grid(ROOT / "scenarios" / "studies" / "e1.toml", POLICIES)
    assert grid == (ROOT / "scenarios" / "e1-faithful.toml", SEEDS, DEFAULT_POLICIES, PREEMPTION, {})


def test_one_study_process_writes_an_output_at_a_time(tmp_path: Path) -> None:
    out = tmp_path / "out.json"
    with only_writer(out), pytest.raises(StudyError, match="another `emulator study` is writing it"):
        StudyRun(_tiny(tmp_path), out).run()
    assert not (tmp_path / "out.json.lock").exists()
