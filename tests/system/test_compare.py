"""`emulator compare` and `emulator report A B`: one set of metric groups in the text table, the
HTML page and the CSV, each row with its delta and ratio; --metrics; outputs only under --out."""

from __future__ import annotations

import csv
import html
import re
from pathlib import Path
from typing import Any

import msgspec
import pytest

from emulator.cli.main import main
from emulator.harness.runner import run_blocking
from emulator.results.compare import compare, comparison_table, load_summary
from emulator.results.metrics import GROUPS, METRICS, lookup, rows
from emulator.results.summary import write_results
from emulator.scenario.loader import scenario_from_dict


def crash_run(directory: Path, mode: str) -> Path:
    """24 nodes, 3 of them crash at 60 s: periodic heartbeats + the RM's liveliness monitor, or
    delta heartbeats + the ring."""
    data: dict[str, Any] = {
        "name": f"crash-{mode}",
        "cluster": {"nodes": [{"count": 24, "cpu": 8, "ram_gib": 32}]},
        "heartbeat": {"mode": mode, "interval_s": 3.0},
        "rm": {"expiry_s": 30.0},
        "workload": {"operations": [{"name": "batch", "cpu": 1, "ram_gib": 2, "tasks": 300,
                                     "seconds_mean": 40, "seconds_deviation": 5, "loop": True}]},
        "faults": [{"kind": "crash", "at_s": 60, "fraction": 0.125}],
        "run": {"duration_s": 240, "seed": 3},
    }
    write_results(run_blocking(scenario_from_dict(data, "<test>")), directory)
    return directory


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("runs")
    return crash_run(root / "periodic", "periodic"), crash_run(root / "delta", "delta")


def text_of(dirs: list[Path], metrics: str | None = None) -> str:
    from rich.console import Console

    console = Console(width=250, record=True)
    console.print(comparison_table(compare([(d.name, load_summary(d)) for d in dirs], metrics=metrics)))
    return console.export_text()


def line(text: str, label: str) -> list[str]:
    cells = [[c.strip() for c in ln.split("│")[1:-1]] for ln in text.splitlines() if "│" in ln]
    found = [c[1:] for c in cells if c and c[0] == label]
    assert found, label
    return found[0]


def test_periodic_vs_delta_shows_heartbeat_and_detection_differences(runs: tuple[Path, Path]) -> None:
    a, b = (load_summary(d) for d in runs)
    text = text_of(list(runs))
    for group in ("utilisation", "fairness", "heartbeats and RM load", "failure detection"):
        assert group in text
    # Heartbeats: far fewer in delta mode; the row carries both values, the delta and the ratio.
    sent = line(text, "heartbeats sent")
    assert sent == [f"{a['heartbeats_sent']:,}", f"{b['heartbeats_sent']:,}",
                    f"{b['heartbeats_sent'] - a['heartbeats_sent']:+,}",
                    f"×{b['heartbeats_sent'] / a['heartbeats_sent']:.3g}"]
    assert b["heartbeats_sent"] < a["heartbeats_sent"] / 2
    per_s = line(text, "heartbeats sent / s")
    assert per_s[0] == f"{a['heartbeats_sent'] / a['duration_s']:,.4g}"
    # Failure detection: both detect the 3 crashes, the ring far sooner.
    assert a["crashed_removed"] == b["crashed_removed"] == 3
    p50a, p50b = a["detection_latency_s"]["p50"], b["detection_latency_s"]["p50"]
    assert p50b < p50a
    assert line(text, "detection latency p50")[:3] == [f"{p50a:,.4g} s", f"{p50b:,.4g} s",
                                                          f"{p50b - p50a:+,.4g} s"]
    assert line(text, "failure detector")[:2] == ["rm_liveliness_monitor", "kring"]


def test_rows_carry_delta_ratio_and_direction() -> None:
    base = {"cpu_utilization": 0.5, "false_removals": 4, "detection_latency_s": {"p99": 10.0},
            "pools": [{"name": "x", "dominant_share": 0.2}]}
    other = {"cpu_utilization": 0.6, "false_removals": 0, "detection_latency_s": {"p99": 2.5},
             "pools": [{"name": "x", "dominant_share": 0.3}, {"name": "y", "dominant_share": 0.1}]}
    by_key = {r.metric.key: r for r in rows([base, other])}
    cpu = by_key["cpu_utilization"]
    assert cpu.deltas == [pytest.approx(0.1)] and cpu.ratios == [pytest.approx(1.2)]
    assert cpu.verdict(1) == "better"
    assert by_key["false_removals"].verdict(1) == "better" and by_key["false_removals"].ratios == [0.0]
    assert by_key["detection_latency_s.p99"].ratios == [0.25]
    # One row per pool any run has; a pool only the second run has has no delta.
    assert by_key["pools.x.dominant_share"].values == [0.2, 0.3]
    assert by_key["pools.y.dominant_share"].values == [None, 0.1]
    assert by_key["pools.y.dominant_share"].deltas == [None]
    assert "jobs.count" not in by_key  # rows no run has are left out


def test_jobs_rows_appear_when_the_summary_has_them(runs: tuple[Path, Path], tmp_path: Path) -> None:
    jobs = {"count": 40, "finished": 38, "jct_s": {"p50": 50.0, "p90": 80.0, "p99": 120.0, "mean": 55.0},
            "queue_delay_s": {"p50": 1.0, "p90": 2.0, "p99": 4.0, "mean": 1.2},
            "per_pool": {"default": {"jct_s": {"p50": 50.0, "p99": 120.0}}}}
    with_jobs = tmp_path / "with-jobs"
    with_jobs.mkdir()
    summary = {**load_summary(runs[0]), "jobs": jobs}
    (with_jobs / "summary.json").write_bytes(msgspec.json.encode(summary))
    without_jobs = tmp_path / "without-jobs"
    without_jobs.mkdir()
    (without_jobs / "summary.json").write_bytes(
        msgspec.json.encode({k: v for k, v in load_summary(runs[0]).items() if k != "jobs"}))
    text = text_of([without_jobs, with_jobs], metrics="jobs")
    assert line(text, "jobs finished") == ["n/a", "38", "", ""]
    assert line(text, "job completion time p99")[1] == "120 s"
    assert "pool default: job completion time p50" in text
    assert "utilisation" not in text and "heartbeats sent" not in text


def test_metrics_selector(runs: tuple[Path, Path], capsys: pytest.CaptureFixture[str]) -> None:
    text = text_of(list(runs), metrics="detection")
    assert "failure detection" in text and "false removals" in text
    assert "heartbeats sent" not in text and "mean CPU utilisation" not in text
    assert "heartbeat mode" in text  # what each run is: always there
    text = text_of(list(runs), metrics="detection_latency_s.*,h1")
    assert "detection latency p99" in text and "h1 (min m_i/n_i)" in text
    assert "false removals" not in text
    assert main(["compare", *map(str, runs), "--metrics", "latency"]) == 2
    err = capsys.readouterr().err
    assert "--metrics 'latency'" in err and "heartbeats" in err and "Traceback" not in err


def html_labels(page: str) -> list[str]:
    return [html.unescape(m) for m in re.findall(r'<td title="[^"]*">([^<]*)</td>', page)]


def test_html_csv_and_text_show_the_same_rows(runs: tuple[Path, Path], tmp_path: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "cmp"
    assert main(["compare", *map(str, runs), "--out", str(out)]) == 0
    text = capsys.readouterr().out
    files = sorted(p.name for p in out.iterdir())
    assert files == ["compare.csv", "compare.html", "compare.json", "heartbeats.png", "removals.png",
                     "utilization.png"]
    labels = html_labels((out / "compare.html").read_text(encoding="utf-8"))
    summaries = [load_summary(d) for d in runs]
    expected = [r.metric.label for r in rows(summaries, METRICS)]
    assert labels == expected and len(labels) > 40
    for label in labels:
        assert f" {label} " in text
    with (out / "compare.csv").open(newline="", encoding="utf-8") as f:
        records = list(csv.DictReader(f))
    assert [r["label"] for r in records] == expected
    hb = next(r for r in records if r["key"] == "heartbeats_sent")
    assert int(hb["delta delta"]) == summaries[1]["heartbeats_sent"] - summaries[0]["heartbeats_sent"]
    assert float(hb["ratio delta"]) == pytest.approx(
        summaries[1]["heartbeats_sent"] / summaries[0]["heartbeats_sent"])
    doc = msgspec.json.decode((out / "compare.json").read_bytes())
    assert doc["baseline"] == "periodic" and {r["group"] for r in doc["rows"]} <= set(GROUPS)
    assert lookup(summaries[0], "detection_latency_s.p50") == next(
        r["periodic"] for r in doc["rows"] if r["key"] == "detection_latency_s.p50")


def test_nothing_is_written_into_the_current_directory(
    runs: tuple[Path, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    monkeypatch.chdir(cwd)
    assert main(["compare", *map(str, runs)]) == 0
    assert list(cwd.iterdir()) == []  # the text table only
    assert main(["report", *map(str, runs)]) == 0
    # One clearly named directory under runs/, everything inside it.
    assert [p.relative_to(cwd).as_posix() for p in cwd.rglob("*") if p.is_dir()] == [
        "runs", "runs/compare-periodic-vs-delta"]
    assert (cwd / "runs" / "compare-periodic-vs-delta" / "compare.html").is_file()
    assert "runs/compare-periodic-vs-delta/" in capsys.readouterr().out
    # --out is a directory: a file name, or a run's own directory, is refused with a clear error.
    assert main(["report", *map(str, runs), "--out", "x.html"]) == 2
    assert main(["compare", *map(str, runs), "--out", str(runs[0])]) == 2
    assert main(["compare", *map(str, runs), "--html", "x.html"]) == 2
    err = capsys.readouterr().err
    assert "give a directory" in err and "one of the runs compared" in err and "--out DIR" in err
    assert not (cwd / "x.html").exists() and not (runs[0] / "compare.html").exists()


def test_a_saved_comparison_prints_as_markdown(runs: tuple[Path, Path], tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "cmp"
    assert main(["compare", *map(str, runs), "--metrics", "detection", "--out", str(out)]) == 0
    capsys.readouterr()
    assert main(["compare", "--table", str(out / "compare.json")]) == 0
    table = capsys.readouterr().out.splitlines()
    assert table[0] == "| metric | periodic | delta | Δ delta | delta / periodic |"
    a, b = (load_summary(d)["false_removals"] for d in runs)
    assert f"| false removals | {a} | {b} | {b - a:+} |" in "\n".join(table)
    assert main(["compare", "--table", str(runs[0] / "summary.json")]) == 2
    assert main(["compare"]) == 2
    assert "not a compare.json" in capsys.readouterr().err
