"""The bench as a study (scenarios/studies/bench.toml, model `emulator-bench`): its points run one
at a time in the study's process, the first design beside today's on the same emulation, and its
tables read the study's output or a bench.json that the `emulator bench` command wrote."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import msgspec
import pytest

from emulator.study.output import FORMAT, read_output
from emulator.study.renderers import renderer
from emulator.study.renderers.bench import bench_of
from emulator.study.runner import StudyRun
from emulator.study.spec import StudyError
from emulator.study.tables import markdown

ROOT = Path(__file__).resolve().parents[2]
BENCH = ROOT / "scenarios" / "studies" / "bench.toml"
# The same code at a small size: 4 nodes for 36 emulated s, a tenth of the floor, 500 hosted nodes.
SMALL = {"nodes": 4, "hours": 0.01, "floor_heartbeats": 30_000, "memory_nodes": 500}


@pytest.fixture(scope="module")
def baseline_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[str]]:
    out = tmp_path_factory.mktemp("bench") / "bench.json"
    lines: list[str] = []
    StudyRun(BENCH, out, jobs=2, say=lines.append, sets=dict(SMALL),
             axes={"design": ["des", "asyncio"]}).run()
    return out, lines


def test_the_bench_study_times_its_points_one_at_a_time(baseline_run: tuple[Path, list[str]]) -> None:
    out, lines = baseline_run
    # --jobs 2, yet every point in this process, one after another, each announced as it starts.
    assert any("times the CPU" in line and "one at a time" in line for line in lines)
    started = [line.split("] ")[1] for line in lines if line.endswith(": started")]
    assert started == [
        "speed|mode=periodic|design=des: started", "speed|mode=periodic|design=asyncio: started",
        "speed|mode=delta|design=des: started", "speed|mode=delta|design=asyncio: started",
        # The floor and the memory are one point each (their variants' own axis values).
        "floor|mode=periodic|design=des: started", "memory|mode=periodic|design=des: started",
    ]
    points = read_output(out).points
    assert {p.output.get("peak_rss_mb", 0) > 0 for p in points if p.variant == "speed"} == {True}


def test_its_report_has_every_part_of_the_committed_one(baseline_run: tuple[Path, list[str]]) -> None:
    out, _ = baseline_run
    data = msgspec.json.decode(out.read_bytes())
    report = bench_of(data)
    committed = bench_of(msgspec.json.decode((ROOT / "docs" / "bench.json").read_bytes()))
    assert set(report) == set(committed)
    for mode in ("periodic", "delta"):
        assert set(committed[mode]) <= set(report[mode])
        # The first design ran the same emulation: the same heartbeats and tasks, one invocation.
        for key in ("heartbeats", "statuses", "tasks_scheduled"):
            assert report["baseline"][mode][key] == report[mode][key]
        assert report[mode]["design"] == "des" and report["baseline"][mode]["design"] == "asyncio"
    # The gap to the floor is part of every bench: the emulator is slower than the bare loop.
    assert report["floor_us_per_heartbeat"] > 0 and report["periodic"]["x_floor"] > 1
    assert report["memory"]["nodes"] == SMALL["memory_nodes"]
    table = renderer("bench")(data)
    assert f"{report['periodic']['us_per_heartbeat']:.1f} ({report['periodic']['x_floor']:g}×)" in table
    assert "The first design (asyncio's loop as the virtual clock" in table
    # The study's own table (`emulator study --table`) is the docs' table of the same output.
    assert table in markdown(read_output(out))
    # The README's headline and the scale model's check rows read it as they read a bench.json.
    headline = renderer("scale-headline")(committed, data)
    assert f"| 4 nodes × 0.6 min | {report['periodic']['cpu_s']:,.0f} s |" in headline


@pytest.mark.parametrize("name", ["bench", "scale-20k", "scale-100k"])
def test_the_committed_bench_files_are_study_output(name: str) -> None:
    # Recorded by the study (each point's exact scenario kept), no longer by the command it replaced.
    committed = msgspec.json.decode((ROOT / "docs" / f"{name}.json").read_bytes())
    assert committed["format"] == FORMAT and committed["study"]["model"] == "emulator-bench"
    assert bench_of(committed)["periodic"]["cpu_s"] > 0


def test_a_study_output_that_is_no_bench_is_refused(baseline_run: tuple[Path, list[str]]) -> None:
    out, _ = baseline_run
    data: dict[str, Any] = msgspec.json.decode(out.read_bytes())
    data["points"] = [p for p in data["points"] if p["variant"] != "floor"]
    with pytest.raises(StudyError, match=r"bench\.toml: a bench report needs a `floor` point"):
        bench_of(data)
    other = msgspec.json.decode((ROOT / "docs" / "e4.json").read_bytes())
    with pytest.raises(StudyError, match="not of the bench"):
        bench_of(other)


def test_a_variant_gives_only_axes_the_study_has(tmp_path: Path) -> None:
    text = BENCH.read_text(encoding="utf-8").replace('axes = { mode = ["periodic"], design = ["des"] }',
                                                     'axes = { modes = ["periodic"] }', 1)
    path = tmp_path / "bench.toml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(StudyError, match=r"bench\.toml: at `variants\[1\]\.axes\.modes`: `modes` is not an "
                                         r"axis of the study"):
        StudyRun(path, tmp_path / "out.json")
