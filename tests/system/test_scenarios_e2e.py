"""Shipped scenarios and whole runs, in virtual time."""

from __future__ import annotations

from pathlib import Path

import msgspec
import pytest

from emulator.cli.main import main
from emulator.harness.runner import run_blocking
from emulator.results.summary import build_summary, write_results
from emulator.scenario.loader import load_scenario

ROOT = Path(__file__).resolve().parents[2]
SCENARIOS = ROOT / "scenarios"


def ops_by_name(summary: dict) -> dict[str, dict]:
    return {o["name"]: o for o in summary["operations"]}


def test_drf_paper_example_settles_at_three_and_two() -> None:
    summary = build_summary(run_blocking(load_scenario(SCENARIOS / "drf-paper-example.toml")))
    ops = ops_by_name(summary)
    assert ops["A"]["running_tasks"] == 3
    assert ops["B"]["running_tasks"] == 2
    assert ops["A"]["dominant_share_end"] == pytest.approx(2 / 3)
    assert ops["B"]["dominant_share_end"] == pytest.approx(2 / 3)


def test_fifo_starves_op2_while_drf_gives_it_its_fair_share() -> None:
    path = SCENARIOS / "fifo-vs-drf.toml"
    drf = ops_by_name(build_summary(run_blocking(load_scenario(path))))
    fifo = ops_by_name(build_summary(run_blocking(load_scenario(path, {"scheduler.policy": "fifo"}))))
    assert fifo["op1"]["running_tasks"] == 1000
    assert fifo["op2"]["running_tasks"] <= 220
    assert drf["op1"]["running_tasks"] == 1000
    # DRF's fair share for op2 is 220 tasks (0.6875); it gets within 5% of it, FIFO about half.
    assert drf["op2"]["running_tasks"] >= 209
    assert drf["op2"]["dominant_share"] == pytest.approx(drf["op2"]["fair_share"], rel=0.05)
    assert fifo["op2"]["running_tasks"] < 0.6 * drf["op2"]["running_tasks"]


def test_same_seed_gives_byte_identical_results(tmp_path: Path) -> None:
    sc = load_scenario(SCENARIOS / "quickstart.toml", {"run.duration_s": 900})
    outs = []
    for name in ("a", "b"):
        out = tmp_path / name
        out.mkdir()
        write_results(run_blocking(sc, out / "events.jsonl"), out)
        outs.append(out)
    for f in ("summary.json", "timeseries.csv", "events.jsonl"):
        assert (outs[0] / f).read_bytes() == (outs[1] / f).read_bytes(), f
    other = build_summary(
        run_blocking(load_scenario(SCENARIOS / "quickstart.toml", {"run.duration_s": 900, "run.seed": 8}))
    )
    first = msgspec.json.decode((outs[0] / "summary.json").read_bytes())
    assert (
        other["allocations"] != first["allocations"] or other["cpu_utilization"] != first["cpu_utilization"]
    )


def test_run_command_writes_results(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "qs"
    assert (
        main(
            [
                "run",
                str(SCENARIOS / "quickstart.toml"),
                "--out",
                str(out),
                "--quiet",
                "--set",
                "run.duration_s=600",
            ]
        )
        == 0
    )
    summary = msgspec.json.decode((out / "summary.json").read_bytes())
    for key in (
        "cpu_utilization",
        "ram_utilization",
        "heartbeats_sent",
        "heartbeat_responses",
        "update_events",
        "h1",
        "h2",
        "nodes_lost",
        "rm_queue_depth_max",
        "operations",
    ):
        assert key in summary
    assert summary["heartbeats_sent"] > 0 and summary["h1"] == 1.0
    assert {"name", "pool", "running_tasks", "completed_tasks", "dominant_share", "fair_share"} <= set(
        summary["operations"][0]
    )
    rows = (out / "timeseries.csv").read_text().splitlines()
    assert rows[0].startswith("t_s,cpu_utilization,ram_utilization")
    assert len(rows) == 1 + 600 / 3
    events = [msgspec.json.decode(line) for line in (out / "events.jsonl").read_text().splitlines()]
    names = {e["event"] for e in events}
    assert {"node.registered", "operation.submitted", "operation.started", "operation.finished"} <= names
    assert all("t" in e for e in events)


@pytest.mark.parametrize("path", sorted(SCENARIOS.glob("*.toml")), ids=lambda p: p.name)
def test_every_shipped_scenario_validates(path: Path) -> None:
    assert main(["validate", str(path)]) == 0


def test_quickstart_story_each_team_gets_its_fair_share() -> None:
    # What the README's "your first run" tells: under DRF both teams run at their fair share
    # (the weight-2 team on CPU, its contended resource) and the cluster's CPU is nearly full.
    s = build_summary(run_blocking(load_scenario(SCENARIOS / "quickstart.toml")))
    pools = {p["name"]: p for p in s["pools"]}
    for name in ("analytics", "etl"):
        assert pools[name]["dominant_share"] == pytest.approx(pools[name]["fair_share"], rel=0.05), name
    assert pools["analytics"]["dominant_share"] > 2 * pools["etl"]["dominant_share"]
    assert s["cpu_utilization"] > 0.9
