"""Run reports: PNG plots and a self-contained report.html, for one run and side by side."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import msgspec
import pytest

from emulator.cli.main import main
from emulator.harness.runner import run_blocking
from emulator.results.report import ReportError, load_run, write_compare_report, write_run_report
from emulator.results.summary import write_results
from emulator.scenario.loader import scenario_from_dict

PNG = b"\x89PNG\r\n\x1a\n"


def found(pattern: str, text: str) -> str:
    m = re.search(pattern, text)
    assert m is not None, pattern
    return m.group(1)


def run_to(directory: Path, seed: int, nodes: int = 8) -> Path:
    scenario = scenario_from_dict({
        "name": f"report-{seed}",
        "cluster": {"nodes": [{"count": nodes, "cpu": 16, "ram_gib": 64}]},
        "heartbeat": {"interval_s": 3.0},
        "workload": {"operations": [{"name": "batch", "cpu": 2, "ram_gib": 6, "job_count": 50,
                                     "seconds_mean": 60, "seconds_deviation": 10, "loop": True}]},
        "run": {"duration_s": 600, "seed": seed},
    })
    directory.mkdir(parents=True)
    outcome = run_blocking(scenario, directory / "events.jsonl")
    write_results(outcome, directory)
    return directory


def test_single_run_report_is_self_contained(tmp_path: Path) -> None:
    d = run_to(tmp_path / "a", seed=1)
    html = write_run_report(d).read_text(encoding="utf-8")
    for name in ("utilization.png", "heartbeats.png", "removals.png"):
        data = (d / name).read_bytes()
        assert data.startswith(PNG) and len(data) > 10_000
    # Opens offline: no external scripts, styles or images.
    assert not re.search(r"""(src|href)=["']?(https?:)?//""", html)
    assert "uPlot" in html and "REPORT_DATA" in html
    data = msgspec.json.decode(found(r"const REPORT_DATA = (.*?);</script>", html))
    summary = msgspec.json.decode((d / "summary.json").read_bytes())
    rows = (d / "timeseries.csv").read_text().count("\n") - 1
    assert len(data) == 1 and len(data[0]["series"]["t_s"]) == rows > 150
    assert data[0]["series"]["nodes"][-1] == 8
    # The summary table shows the run's own figures.
    assert f"{100 * summary['cpu_utilization']:.2f}%" in html
    assert f"{summary['heartbeats_sent']:,}" in html
    assert ">batch<" in html


def test_compare_report_puts_runs_side_by_side(tmp_path: Path) -> None:
    a = run_to(tmp_path / "a", seed=1)
    b = run_to(tmp_path / "b", seed=2, nodes=10)
    out = write_compare_report([a, b], tmp_path / "cmp" / "both.html")
    html = out.read_text(encoding="utf-8")
    assert "report-1" in html and "report-2" in html
    data = msgspec.json.decode(found(r"const REPORT_DATA = (.*?);</script>", html))
    assert [r["series"]["nodes"][-1] for r in data] == [8, 10]
    for name in ("both-utilization.png", "both-heartbeats.png", "both-removals.png"):
        assert (tmp_path / "cmp" / name).read_bytes().startswith(PNG)
    row = found(r"<tr><td>nodes</td>(.*?)</tr>", html)
    assert re.findall(r"<td>(.*?)</td>", row) == ["8", "10"]


def test_removals_are_counted_from_the_event_log(tmp_path: Path) -> None:
    d = run_to(tmp_path / "a", seed=1)
    with (d / "events.jsonl").open("a", encoding="utf-8") as f:
        f.write('{"t": 100.5, "event": "node.lost", "machine_id": 3}\n')
        f.write('{"t": 101.0, "event": "node.lost", "machine_id": 4}\n')
    run = load_run(d)
    assert run.removals == [100.5, 101.0]
    from emulator.results.report import derived

    removals = derived(run)["removals"]
    assert sum(removals) == 2 and removals[run.series["t_s"].index(102.0)] == 2


def test_report_cli_and_clear_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a = run_to(tmp_path / "a", seed=1)
    assert main(["report", str(a)]) == 0
    assert (a / "report.html").is_file()
    out = tmp_path / "cmp"
    assert main(["report", str(a), str(a), "--out", str(out)]) == 0
    assert (out / "compare.html").is_file()
    assert main(["report", str(tmp_path / "missing")]) == 2
    assert "summary.json: missing" in capsys.readouterr().err
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "summary.json").write_text("{}")
    (tmp_path / "bad" / "timeseries.csv").write_text("t_s,nodes\n1.0,abc\n")
    with pytest.raises(ReportError, match=r"timeseries.csv:2: non-numeric"):
        load_run(tmp_path / "bad")


def test_run_command_writes_the_report(tmp_path: Path) -> None:
    scenario = Path(__file__).parents[2] / "scenarios" / "quickstart.toml"
    out = tmp_path / "qs"
    assert main(["run", str(scenario), "--out", str(out), "--duration", "400", "--quiet"]) == 0
    assert (out / "report.html").is_file() and (out / "utilization.png").is_file()


def crash_run_to(directory: Path) -> Path:
    """Two pools, a warm-up and a crash fault at 200 s (virtual time)."""
    scenario = scenario_from_dict({
        "name": "report-faults",
        "cluster": {"nodes": [{"count": 10, "cpu": 16, "ram_gib": 64}]},
        "heartbeat": {"interval_s": 3.0},
        "workload": {
            "pools": [{"name": "prod", "weight": 2.0}, {"name": "batch"}],
            "operations": [
                {"name": "web", "pool": "prod", "cpu": 2, "ram_gib": 4, "job_count": 40,
                 "seconds_mean": 40, "seconds_deviation": 5, "loop": True},
                {"name": "etl", "pool": "batch", "cpu": 1, "ram_gib": 8, "job_count": 50,
                 "seconds_mean": 60, "seconds_deviation": 5, "loop": True},
            ],
        },
        "rm": {"expiry_s": 30.0, "monitor_interval_s": 3.0},
        "faults": [{"kind": "crash", "at_s": 200, "count": 2}],
        "run": {"duration_s": 400, "seed": 4, "warmup_s": 60},
    })
    directory.mkdir(parents=True)
    write_results(run_blocking(scenario, directory / "events.jsonl"), directory)
    return directory


def test_report_draws_each_chart_once_and_leaves_empty_ones_out(tmp_path: Path) -> None:
    from emulator.results.chartspec import charts_for

    d = crash_run_to(tmp_path / "f")
    html = write_run_report(d).read_text(encoding="utf-8")
    charts = msgspec.json.decode(found(r"const REPORT_CHARTS = (.*?);</script>", html))
    ids = [c["id"] for c in charts]
    assert len(ids) == len(set(ids))
    # Drawn once: the PNGs of the same figures are linked, not shown again.
    assert "<img" not in html and 'href="utilization.png"' in html and 'href="shares.png"' in html
    # DRF without preemption refuses and preempts nothing: no scheduler chart.
    run = load_run(d)
    assert not any(run.series["refusals"]) and not any(run.series["preemptions"])
    assert "scheduler" not in ids
    assert {"utilization", "tasks", "nodes", "removals", "pool_share", "pool_running", "op_share"} <= set(ids)
    # Per pool: a dominant (solid) and a fair (dashed) series per pool, one colour per pool.
    share = next(c for c in charts if c["id"] == "pool_share")
    labels = [s["label"] for s in share["series"]]
    assert labels == ["prod dominant", "prod fair", "batch dominant", "batch fair"]
    assert share["series"][0]["color"] == share["series"][1]["color"] != share["series"][2]["color"]
    assert share["series"][0]["dash"] is None and share["series"][1]["dash"]
    # Without removals the removals chart goes too.
    quiet = run_to(tmp_path / "q", seed=1)
    assert "removals" not in [c["id"] for c in charts_for([load_run(quiet)])]


def test_plots_shade_the_warmup_and_mark_faults(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from emulator.results import plots

    d = crash_run_to(tmp_path / "f")
    figures: dict[str, object] = {}
    monkeypatch.setattr(plots, "_save", lambda fig, path: figures.setdefault(path.name, fig))
    run = load_run(d)
    assert run.faults == [200.0] and run.summary["warmup_s"] == 60
    names = [p.name for p in plots.write_plots([run], d)]
    assert names == ["utilization.png", "heartbeats.png", "removals.png", "shares.png"]
    for name, fig in figures.items():
        for ax in fig.axes:  # type: ignore[attr-defined]
            spans = [p for p in ax.patches if p.get_label() == "warm-up"]
            assert len(spans) == 1, name
            assert spans[0].get_x() == 0 and spans[0].get_width() == 60, name
            faults = [ln for ln in ax.lines
                      if ln.get_linestyle() == "--" and list(ln.get_xdata()) == [200, 200]]
            assert len(faults) == 1, name
    # Counts start at zero, with whole-number ticks.
    removals = figures["removals.png"].axes  # type: ignore[attr-defined]
    assert len(removals) == 2
    for ax in removals:
        assert ax.get_ylim()[0] == 0
        assert all(float(t).is_integer() for t in ax.get_yticks())


def test_timeseries_has_per_pool_and_per_entry_shares(tmp_path: Path) -> None:
    d = crash_run_to(tmp_path / "f")
    header = (d / "timeseries.csv").read_text().splitlines()[0].split(",")
    share_cols = [c for c in header if c.startswith(("pool:", "op:"))]
    assert share_cols == [f"{k}:{n}:{m}" for k, names in (("pool", ("prod", "batch")), ("op", ("web", "etl")))
                          for n in names for m in ("dominant_share", "fair_share", "running", "pending")]
    run = load_run(d)
    for n in ("prod", "batch"):
        assert max(run.series[f"pool:{n}:dominant_share"]) > 0.05
        assert 0 < max(run.series[f"pool:{n}:fair_share"]) <= 1
        assert max(run.series[f"pool:{n}:running"]) > 0
    # A pool's running tasks are its entries' (one entry per pool here), and sum to the total.
    assert run.series["pool:prod:running"] == run.series["op:web:running"]
    prod, batch = run.series["pool:prod:running"], run.series["pool:batch:running"]
    total = [a + b for a, b in zip(prod, batch, strict=True)]
    assert total == run.series["running_tasks"]
    # The scenario's crash counts as the scenario's.
    summary = msgspec.json.decode((d / "summary.json").read_bytes())
    assert summary["crashed_by_scenario"] == 2 and summary["crashed_from_page"] == 0
    assert summary["crashed_removed_by_scenario"] == summary["crashed_removed"] == 2



def test_shares_plot_of_many_pools_keeps_its_axes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # E1 has 24 pools: a legend of 48 entries inside the axes collapsed them (matplotlib warned,
    # and the warning is an error here) and hid the plot.
    from emulator.results import plots
    from emulator.results.rundata import RunData

    t = [float(10 * i) for i in range(50)]
    series = {"t_s": t}
    for k in range(24):
        series[f"pool:user{k:02d}:dominant_share"] = [0.04 + 0.001 * k] * len(t)
        series[f"pool:user{k:02d}:fair_share"] = [0.042] * len(t)
    run = RunData(tmp_path, {"warmup_s": 100}, series)
    assert plots.plot_shares([run], tmp_path / "shares.png") == tmp_path / "shares.png"
    assert (tmp_path / "shares.png").read_bytes().startswith(PNG)
    drawn: list[Any] = []
    save = plots._save

    def keep(fig: Any, path: Path) -> None:
        drawn.append(fig)
        save(fig, path)

    monkeypatch.setattr(plots, "_save", keep)
    plots.plot_shares([run], tmp_path / "again.png")
    (ax,) = drawn[0].axes
    assert ax.get_position().height > 0.4  # the plot keeps most of the figure
    (legend,) = drawn[0].legends
    texts = [x.get_text() for x in legend.get_texts()]
    assert texts[:3] == ["dominant share", "fair share", "warm-up"]
    assert len(texts) == 27  # the two line styles, the warm-up, one entry per pool
    colours = [line.get_color() for line in ax.get_lines()[::2]][:20]  # dominant-share lines
    assert len(set(colours)) == 20  # the first 20 pools each have a colour of their own
