"""Run reports: PNG plots and a self-contained report.html, for one run and side by side."""

from __future__ import annotations

import re
from pathlib import Path

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
    scenario = Path(__file__).parent.parent / "scenarios" / "quickstart.toml"
    out = tmp_path / "qs"
    assert main(["run", str(scenario), "--out", str(out), "--duration", "400", "--quiet"]) == 0
    assert (out / "report.html").is_file() and (out / "utilization.png").is_file()
