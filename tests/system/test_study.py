"""`emulator study`: a study file's points run into one JSON, resumed without re-running done
points, rendered as tables from the JSON alone; a bad study file is one clear error."""

from __future__ import annotations

from pathlib import Path

import msgspec
import pytest

from emulator.cli.figure_table import FIGURES
from emulator.cli.main import main
from emulator.results.figures import stale
from emulator.results.record import load_record
from emulator.scenario.loader import load_scenario
from emulator.study.modelpoints import ModelResolver
from emulator.study.output import read_output
from emulator.study.points import Resolver, expand
from emulator.study.runner import StudyRun, only_writer, run_point
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


# TINY keeping more of each point than its metrics, and plotting one of the series it keeps.
COLLECTED = TINY.replace('metrics = [', 'collect = ["pools", "timeseries.t_s", "timeseries.removals", '
                         '"traffic.to_rm_messages", "traffic.to_rm_bytes"]\nmetrics = [') + (
    '\n[[plots]]\nname = "removals"\nseries = "timeseries.removals"\n')


@pytest.mark.parametrize(("change", "message"), [
    (('"pools", ', '"pool", '), "tiny.toml: at `collect[0]`: `pool` is not a section of summary.json, a "
     "`timeseries.COLUMN`, `timing.FIELD`, `traffic.FIELD` or `rm.FIELD`; did you mean `pools`?"),
    (('"pools", ', '"timing.wall", '), "tiny.toml: at `collect[0]`: `timing.wall` is not a section of "
     "summary.json, a `timeseries.COLUMN`, `timing.FIELD`, `traffic.FIELD` or `rm.FIELD`; did you mean "
     "`timing.wall_s`?"),
    (('"timeseries.removals", "traffic', '"timeseries.removal", "traffic'),
     "tiny.toml: at `collect[2]`: `removal` is not a column of timeseries.csv; did you mean "
     "`timeseries.removals`?"),
    (('"pools", ', '"pools", "pools", '), "tiny.toml: at `collect[1]`: `pools` is collected already"),
    (('series = "timeseries.removals"', 'series = "timeseries.to_rm_messages"'),
     "tiny.toml: at `plots[0].series`: `timeseries.to_rm_messages` is not a `timeseries.COLUMN` the study "
     "collects"),
    (('"timeseries.t_s", ', ''),
     "tiny.toml: at `plots[0].series`: a plot needs `timeseries.t_s` in `collect`"),
    (('series = ', 'serie = '), "tiny.toml: at `plots[0].serie`: unknown field; did you mean `series`?"),
    (('series = "timeseries.removals"\n', 'series = "timeseries.removals"\nwhere = { seed = 3 }\n'),
     "tiny.toml: at `plots[0].where.seed`: 3 is not one of its values"),
    (('series = "timeseries.removals"\n', 'series = "timeseries.removals"\n[[plots]]\nname = "removals"\n'
      'series = "timeseries.removals"\n'), "tiny.toml: at `plots[1].name`: `removals` is the name of an "
     "earlier plot"),
])
def test_what_a_study_collects_and_plots_is_checked(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                    change: tuple[str, str], message: str) -> None:
    text = COLLECTED.replace(*change)
    assert text != COLLECTED
    study = _tiny(tmp_path, text)
    assert main(["study", str(study), "--out", str(tmp_path / "out.json")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"error: {study.parent}/{message}"), err
    assert "\n" not in err


def test_a_point_keeps_what_the_study_collects_and_its_plots_draw_from_the_output(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    text = COLLECTED.replace("seed = [1, 2]", "seed = [3]")
    text = text.replace('"run.duration_s" = 120', '"run.duration_s" = 60')
    study, out, plots = _tiny(tmp_path, text), tmp_path / "out.json", tmp_path / "plots"
    assert main(["study", str(study), "--out", str(out), "--jobs", "1", "--quiet"]) == 0
    points = read_output(out).points
    kept = points[0].collected
    assert list(kept) == ["pools", "timeseries.t_s", "timeseries.removals", "traffic.to_rm_messages",
                          "traffic.to_rm_bytes"]
    # Every heartbeat is a message to the RM (and registrations, statuses ... besides).
    assert kept["traffic.to_rm_messages"] > points[0].metrics["heartbeats_sent"] > 0
    assert kept["traffic.to_rm_bytes"] > 10 * kept["traffic.to_rm_messages"]
    assert [u["name"] for u in kept["pools"]] == ["analytics", "etl"] and "dominant_share" in kept["pools"][0]
    assert kept["timeseries.t_s"][:2] == [3.0, 6.0] and len(kept["timeseries.removals"]) == 20
    capsys.readouterr()
    assert main(["study", "--table", str(out), "--plots", str(plots)]) == 0
    rows = (plots / "removals.csv").read_text(encoding="utf-8").splitlines()
    assert rows[0] == "t_s,periodic,delta" and rows[1] == "3.0,0,0" and len(rows) == 21
    assert (plots / "removals.png").stat().st_size > 10_000
    # A point of an output from before `collect` existed is run again for the sections it lacks.
    doc = msgspec.json.decode(out.read_bytes())
    del doc["points"][0]["collected"]
    out.write_bytes(msgspec.json.encode(doc))
    assert [p.key for p in StudyRun(study, out, say=lambda _: None).todo] == ["periodic|seed=3"]


STUDIES = sorted((ROOT / "scenarios" / "studies").glob("*.toml"))


@pytest.mark.parametrize("path", STUDIES, ids=lambda p: p.stem)
def test_the_committed_studies_resolve(path: Path) -> None:
    """Each variant's first and last point (every axis at both ends) is a valid scenario, or a
    model study's valid parameters."""
    study = load_study(path)
    resolver, points = Resolver(study, path), expand(study)
    for variant in {p.variant for p in points}:
        mine = [p for p in points if p.variant == variant]
        for point in (mine[0], mine[-1]):
            if study.model:
                ModelResolver(study, path).params(point)
            else:
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


@pytest.mark.parametrize("name", ["e1", "e1-seeds20", "e1-explore", "ring-e3", "study-quickstart-heartbeats",
                                  "usage-messages"])
def test_a_committed_study_output_is_its_study_file_as_it_is_now(name: str) -> None:
    """Every point's exact scenario is what the study file gives today (no run: resolved only), and
    none is missing: `emulator study FILE --out` would find nothing to run."""
    out = ROOT / "docs" / f"{name}.json"
    committed = read_output(out)
    run = StudyRun(ROOT / committed.file, out, say=lambda _: None)
    assert run.todo == []
    assert [p.key for p in committed.points] == [p.key for p in run.points]


def test_a_replayed_trace_is_kept_as_its_jobs_count_and_digest(tmp_path: Path) -> None:
    """A trace's jobs, expanded, are megabytes a point: the output keeps their count and digest."""
    study = tmp_path / "synth.toml"
    study.write_text(f"""
scenario = "{ROOT}/scenarios/traces/synth.toml"
metrics = ["jobs.finished"]
[axes]
"workload.trace.seed" = [1, 2]
""", encoding="utf-8")
    run = StudyRun(study, tmp_path / "out.json", say=lambda _: None)
    one, two = (run.data[f"base|workload.trace.seed={s}"]["workload"] for s in (1, 2))
    assert "operations" not in one
    assert one["operations_count"] == len(run.scenarios["base|workload.trace.seed=1"].workload.operations)
    # SYNTH's generator seed differs: other jobs, another digest (a resumed study runs it again).
    assert one["operations_sha256"] != two["operations_sha256"]
    assert len(msgspec.json.encode(run.data["base|workload.trace.seed=1"])) < 20_000


def test_one_study_process_writes_an_output_at_a_time(tmp_path: Path) -> None:
    out = tmp_path / "out.json"
    with only_writer(out), pytest.raises(StudyError, match="another `emulator study` is writing it"):
        StudyRun(_tiny(tmp_path), out).run()
    assert not (tmp_path / "out.json.lock").exists()


def test_a_variant_unsets_what_an_override_cannot_clear(tmp_path: Path,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    """usage-messages.toml's `no-usage` variant: the operations without their usage models (None,
    not a model with defaults); a path the base lacks is one clear error."""
    path = ROOT / "scenarios" / "studies" / "usage-messages.toml"
    study = load_study(path)
    resolver = Resolver(study, path)
    for point in expand(study):
        ops = resolver.scenario(point).workload.operations
        assert [op.usage is None for op in ops] == [point.variant == "no-usage"] * 3
    text = TINY.replace('name = "delta"', 'name = "delta"\nunset = ["rm.expiry_s", "workload.operations[3]"]')
    assert main(["study", str(_tiny(tmp_path, text)), "--out", str(tmp_path / "out.json")]) == 2
    assert capsys.readouterr().err.strip() == (f"error: {tmp_path}/tiny.toml: at `variants[1].unset[1]`: "
                                               f"`workload.operations[3]` is not in {QUICKSTART}")
    text = TINY.replace('name = "delta"', 'name = "delta"\nunset = ["rm.expiry_s"]')
    delta = Resolver(load_study(_tiny(tmp_path, text)), tmp_path / "tiny.toml")
    points = expand(delta.study)
    assert delta.scenario(points[-1]).rm.expiry_s != 60 == delta.scenario(points[0]).rm.expiry_s
