"""E2's sweep as a study: the same points give the same E2 tables from a study's output as from the
``sweep.json`` that `emulator sweep` wrote; limits, the stop rule, command-line overrides, real-time
points one at a time, and plots over the nodes axis."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import msgspec
import pytest

from emulator.cli.main import main
from emulator.study import runner
from emulator.study.output import read_output
from emulator.study.plots import write_plots
from emulator.study.renderers import e2 as e2_tables
from emulator.study.renderers import yarn2020
from emulator.study.runner import StudyRun
from emulator.study.spec import StudyError
from emulator.study.sweep import calibration_toml, largest_ok, row, saturates_first, sweep_of
from emulator.study.tables import markdown

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data" / "e2"
KEEP = """
metrics = ["h1", "h2", "heartbeats_sent", "update_events", "allocations", "nodes_lost",
           "rm_queue_depth_max", "rm_wait_p99_s", "messages_to_rm_per_node_minute"]
collect = ["heartbeats_skipped", "registrations", "costs", "workers", "lag", "timing.wall_s",
           "timing.lateness_p99_s", "rm.busy_s"]
"""


def _json(path: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return data


def test_the_same_points_give_the_same_e2_tables_from_a_study_as_from_a_sweep_json(tmp_path: Path) -> None:
    # Virtual time: the study run here and `emulator sweep`'s file of the same four points.
    out = tmp_path / "virtual.json"
    StudyRun(DATA / "tiny-virtual.toml", out, say=lambda _: None).run()
    old, new = _json(DATA / "tiny-virtual.sweep.json"), _json(out)
    assert "rows" not in new  # a study's own output, read through the boundary
    assert e2_tables.markdown_table(new) == e2_tables.markdown_table(old)
    assert [r["rm_cpu_percent"] for r in sweep_of(new)["rows"]] == [r["rm_cpu_percent"] for r in old["rows"]]
    # Real time over TCP (two runs of 200 nodes): `emulator sweep`'s rows of them, and the same
    # runs as a study keeps each (its summary's metrics and sections).
    old, new = _json(DATA / "tiny-tcp.sweep.json"), _json(DATA / "tiny-tcp.study.json")
    for render in (e2_tables.markdown_table, e2_tables.costs_table, saturates_first):
        assert render(new) == render(old)
    assert sweep_of(new)["rows"] == old["rows"]
    assert sweep_of(new)["calibration_us"] == old["calibration_us"] is not None
    assert {k: v for k, v in sweep_of(new).items() if k not in ("rows", "file")} == {
        k: v for k, v in old.items() if k not in ("rows", "file")}
    # The fitted model stays reachable from the study's output: its calibration table.
    text = markdown(read_output(DATA / "tiny-tcp.study.json"))
    assert calibration_toml(old) in text and "[rm.service_time]  # fitted wall µs x speed 5" in text
    assert f"heartbeat_us = {old['calibration_us']['heartbeat_us'] * 5:.3f}" in text
    # yarn2020's table takes a study per mode as it took a sweep per mode.
    assert yarn2020.markdown_table(new, new) == yarn2020.markdown_table(old, old)


SWEEP = """
name = "tiny"
[cluster]
nodes = [{ count = 10, cpu = 20, ram_gib = 40 }]
[rm.service_time]
heartbeat_us = 20000
heartbeat_per_status_us = 2000
node_update_us = 1000
[[workload.operations]]
name = "j"
cpu = 1
ram_gib = 2
job_count = 100
seconds_mean = 20
seconds_deviation = 5
repeat = 3
repeat_every_s = 10
[run]
duration_s = 90
warmup_s = 6
seed = 3
"""
STUDY = f"""
name = "tiny-e2"
scenario = "tiny.toml"
{KEEP}
[axes]
nodes = [40, 100, 200]
heartbeat.mode = ["periodic", "delta"]

[limits]
threshold = 0.99
stop_after_failure = true

[[tables]]
render = "limits"

[[plots]]
name = "h1-h2"
x = "nodes"
y = ["h1", "h2"]
lines = "heartbeat.mode"

[[plots]]
name = "rm-cpu"
x = "nodes"
y = ["rm_cpu_percent"]
lines = "heartbeat.mode"
"""


def _study(tmp_path: Path, text: str = STUDY) -> Path:
    (tmp_path / "tiny.toml").write_text(SWEEP, encoding="utf-8")
    path = tmp_path / "study.toml"
    path.write_text(text, encoding="utf-8")
    return path


def test_an_e2_study_scales_the_workload_finds_limits_stops_after_a_failure_and_plots(tmp_path: Path) -> None:
    study, out, lines = _study(tmp_path), tmp_path / "out.json", list[str]()
    run = StudyRun(study, out, say=lines.append, sets={"run.warmup_s": 30.0})
    sc = run.scenarios["base|nodes=40|heartbeat.mode=delta"]
    assert sc.node_count == 40 and sc.workload.operations[0].task_count == 400  # t = n·c·l/a
    assert sc.run.warmup_s == 30.0  # --set reaches every point
    output = run.run()
    sweep = sweep_of(msgspec.to_builtins(output))
    by = {(r["mode"], r["nodes"]): r for r in sweep["rows"]}
    assert by[("periodic", 40)]["h1"] == 1.0 and by[("periodic", 40)]["h2"] == 1.0
    # 100 nodes x 3 s heartbeats of >= 20 ms each overload the modelled RM in periodic mode...
    assert by[("periodic", 100)]["h2"] < 0.99 <= by[("delta", 100)]["h2"]
    # ... so the stop rule does not run periodic at 200; delta, still within its limit, runs on.
    assert ("periodic", 200) not in by and ("delta", 200) in by
    assert output.skipped == ["base|nodes=200|heartbeat.mode=periodic"]
    assert any(line.startswith("skipped base|nodes=200|heartbeat.mode=periodic") for line in lines)
    msgs = "messages_to_rm_per_node_minute"
    assert by[("delta", 40)][msgs] < by[("periodic", 40)][msgs]
    assert sweep["largest_ok"] == {"periodic": {"nodes": 40, "limited_by_sweep": False},
                                   "delta": {"nodes": 100, "limited_by_sweep": False}}
    assert read_output(out).overrides == {"set": {"run.warmup_s": 30.0}}
    text = markdown(output)
    assert "Largest n with h1, h2 ≥ 0.99, periodic: 40\n" in text and "Partial" not in text
    assert "Not run: 1 points past a failed one" in text
    written = write_plots(output, tmp_path / "plots")
    assert {p.name for p in written} == {"h1-h2.png", "h1-h2.csv", "rm-cpu.png", "rm-cpu.csv"}
    assert (tmp_path / "plots" / "h1-h2.png").stat().st_size > 10_000
    csv = (tmp_path / "plots" / "rm-cpu.csv").read_text().splitlines()
    assert csv[0] == "heartbeat.mode,nodes,rm_cpu_percent" and len(csv) == 1 + 5
    # A resumed study with another --set would mix runs: refused.
    with pytest.raises(StudyError, match=r"its points ran with --set \{'run.warmup_s': 30.0\}, this study "
                                         r"with --set \(none\)"):
        StudyRun(study, out, say=lambda _: None)


def test_limits_count_only_points_that_kept_up() -> None:
    rows = [{"mode": "delta", "nodes": n, "h1": 1.0, "h2": h2} for n, h2 in ((1, 1.0), (2, 0.995), (3, 0.5))]
    assert largest_ok(rows, "delta", 0.99) == (2, True)
    assert largest_ok(rows[:2], "delta", 0.99) == (2, False)
    rows[1]["overloaded"] = True  # a real-time point that fell behind is no finding, even at h1 = h2 = 1
    assert largest_ok(rows, "delta", 0.99) == (1, True)


def test_a_row_says_which_process_fell_behind() -> None:
    output = read_output(DATA / "tiny-tcp.study.json")
    point = output.points[0]
    assert "overload_reasons" not in row(point)
    why = ["the RM process ran 0.9 s late (p99)"]
    lag = {**point.collected["lag"], "overloaded": True, "reasons": why}
    late = msgspec.structs.replace(point, collected={**point.collected, "lag": lag})
    assert row(late)["overloaded"] and row(late)["overload_reasons"] == why


def test_real_time_points_run_one_at_a_time_whatever_jobs_says(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    study = _study(tmp_path, STUDY.replace("[axes]", 'set = { "run.clock" = "realtime", "run.speed" = 50 }\n'
                                           "[axes]").replace("[40, 100, 200]", "[10, 20]")
                   .replace("stop_after_failure = true", "stop_after_failure = false"))
    ran: list[str] = []

    def fake_point(scenario: Any, *args: Any) -> Any:
        ran.append(f"{scenario.heartbeat.mode}-{scenario.node_count}")
        return {m: 1.0 for m in args[0]}, {c: None for c in args[4]} | {"timing.wall_s": 0.1}, 0.1

    def no_processes(self: Any, todo: Any) -> None:
        raise AssertionError("real-time points went to the process pool")

    monkeypatch.setattr(runner, "run_point", fake_point)
    monkeypatch.setattr(StudyRun, "_run_parallel", no_processes)
    lines: list[str] = []
    StudyRun(study, tmp_path / "out.json", jobs=4, say=lines.append).run()
    assert ran == ["periodic-10", "delta-10", "periodic-20", "delta-20"]
    assert lines[0].startswith("4 real-time points run one at a time, whatever --jobs says")


@pytest.mark.parametrize(("args", "message"), [
    (["--axis", "node=10,20"], "--axis node: not an axis of"),
    (["--axis", "nodes=10,0"], "with --axis: at `axes.nodes`: expected whole numbers >= 1, got [10, 0]"),
    (["--axis", "nodes"], "--axis 'nodes': expected NAME=V1,V2"),
    (["--set", "run.duration_s=-1"], "study.toml: point `base|nodes=40|heartbeat.mode=periodic` (from "
     "`--set`): "),
    (["--set", "scheduler.policy=sideways"], "(from `--set`)"),
    (["--set", "run.duration_s"], "--set 'run.duration_s': expected KEY=VALUE"),
    (["--cluster", "local:0"], "--cluster local:0: expected an address, local or local:N with N >= 1"),
    (["--cluster", "local"], 'point `base|nodes=40|heartbeat.mode=periodic`: --cluster hosts a TCP run\'s '
     'nodes: needs transport.kind = "tcp"'),
])
def test_bad_overrides_are_one_clear_error(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                           args: list[str], message: str) -> None:
    study = _study(tmp_path)
    assert main(["study", str(study), "--out", str(tmp_path / "out.json"), *args]) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and "\n" not in err, err


@pytest.mark.parametrize(("change", "message"), [
    (('"rm.busy_s"]', ']'), "at `limits`: E2's row of each point needs `rm.busy_s` in `metrics` or "
     "`collect`"),
    (('nodes = [40, 100, 200]', 'seed = [1]'), "at `limits`: limits are node counts: the study needs a "
     "`nodes` axis"),
    (('render = "limits"', 'render = "limit"'), "at `tables[0].render`: `limit` is not a scenario study's "
     "table; did you mean `limits`?"),
    (('y = ["rm_cpu_percent"]', 'y = ["rm_cpu"]'), "at `plots[1].y[0]`: `rm_cpu` is not one of the study's "
     "`metrics` (or a sweep-row field"),
    (('x = "nodes"\ny = ["h1"', 'x = "node"\ny = ["h1"'),
     "at `plots[0].x`: `node` is not an axis of the study"),
    (('threshold = 0.99', 'threshold = 1.5'), "at `limits.threshold`: expected `float` <= 1"),
])
def test_what_an_e2_study_asks_for_is_checked(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                              change: tuple[str, str], message: str) -> None:
    text = STUDY.replace(*change)
    assert text != STUDY
    assert main(["study", str(_study(tmp_path, text)), "--out", str(tmp_path / "out.json")]) == 2
    err = capsys.readouterr().err.strip()
    assert f"study.toml: {message}" in err and "\n" not in err, err


@pytest.mark.parametrize("name", ["e2-sweep-virtual", "e2-sweep-virtual-big", "e2-sweep-yarn2020-periodic",
                                  "e2-sweep-yarn2020-delta"])
def test_a_committed_e2_output_is_its_study_as_it_is_now(name: str) -> None:
    """`make e2-virtual` / `e2-yarn2020` would find nothing to run: each point's exact scenario is
    what the study file gives today with the output's own --axis overrides (no run: resolved only)."""
    out = ROOT / "docs" / f"{name}.json"
    committed = read_output(out)
    axes = committed.overrides.get("axes")
    run = StudyRun(ROOT / committed.file, out, say=lambda _: None, axes=axes)
    assert run.todo == [] and [p.key for p in committed.points] == [p.key for p in run.points]


def test_a_tcp_studys_limits_say_which_process_saturated_first() -> None:
    """Over TCP both the RM's and the node hosts' CPU are measured: the limits table names the
    busier one at and past each limit (a virtual study measures no node host)."""
    from emulator.study.sweep import limits_text

    tcp = sweep_of(_json(DATA / "tiny-tcp.study.json"))
    assert limits_text(tcp).endswith("Which process saturated first: no limit reached\n")
    # The periodic point void: past periodic's limit (none kept up), the busier process is named.
    rows = [dict(r, overloaded=r["mode"] == "periodic") for r in tcp["rows"]]
    past = next(r for r in rows if r["mode"] == "periodic")
    who = "node host" if past["worker_cpu_percent"] > past["rm_cpu_percent"] else "RM"
    assert limits_text({**tcp, "rows": rows}).endswith(
        f"Which process saturated first: periodic: busier past it {who} (RM {past['rm_cpu_percent']:.0f}%, "
        f"node host {past['worker_cpu_percent']:.0f}%)\n")
    assert "Which process" not in limits_text(sweep_of(_json(DATA / "tiny-virtual.sweep.json")))


def test_the_headline_labels_each_real_time_sweep_by_its_own_node_hosts() -> None:
    """A sweep with two node hosts is a row of its own kind, not "run again" of a one-host one."""
    docs = ROOT / "docs"
    one, again, two, virtual = (_json(docs / f"{name}.json") for name in
                                ("e2-sweep", "e2-sweep-repeat", "e2-sweep-w2", "e2-sweep-virtual"))
    rows = e2_tables.headline_table(one, virtual, again, two).splitlines()
    labels = [r.split(" (")[0] for r in rows if r.startswith("| real time over TCP")]
    assert labels == ["| real time over TCP, speed 20, 1 node-host process",
                      "| real time over TCP, speed 20, 1 node-host process, run again",
                      "| real time over TCP, speed 20, 2 node-host processes"]
