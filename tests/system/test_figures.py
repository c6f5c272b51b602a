"""Figure tables in the README and docs/ come from the committed result files, not from memory."""

from __future__ import annotations

import shutil
from pathlib import Path

import msgspec
import pytest

from emulator.cli.figure_table import FIGURES
from emulator.cli.main import main
from emulator.results import registry
from emulator.results.figures import refresh, stale
from emulator.study.renderers.e2 import headline_table
from emulator.study.renderers.e2 import markdown_table as sweep_table

ROOT = Path(__file__).resolve().parents[2]
DOCS_WITH_FIGURES = [ROOT / "README.md", ROOT / "docs" / "results.md", ROOT / "docs" / "compare.md",
                     ROOT / "docs" / "traces.md",
                     ROOT / "docs" / "borg.md", ROOT / "docs" / "packing.md", ROOT / "docs" / "scale.md",
                     ROOT / "docs" / "metrics.md"]


@pytest.mark.parametrize("path", DOCS_WITH_FIGURES, ids=lambda p: p.name)
def test_committed_tables_match_their_result_files(path: Path) -> None:
    assert stale(FIGURES, path, ROOT) == [], f"run: emulator figures --write {path.relative_to(ROOT)}"


def test_a_changed_result_file_makes_its_table_stale(tmp_path: Path) -> None:
    (tmp_path / "docs").mkdir()
    src = ROOT / FIGURES["e3"].source
    shutil.copy(src, tmp_path / FIGURES["e3"].source)
    doc = tmp_path / "doc.md"
    doc.write_text(refresh(FIGURES, "intro\n<!-- figure: e3 -->\n<!-- /figure -->\nafter\n", tmp_path))
    assert stale(FIGURES, doc, tmp_path) == []
    assert "| delta + `kring` (ours) | 375 |" in doc.read_text()
    data = (tmp_path / FIGURES["e3"].source).read_text().replace('"nodes_lost": 375', '"nodes_lost": 376', 1)
    (tmp_path / FIGURES["e3"].source).write_text(data)
    assert stale(FIGURES, doc, tmp_path) == ["e3"]


def test_the_glossary_goes_stale_when_the_registry_changes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    doc = tmp_path / "metrics.md"
    doc.write_text(refresh(FIGURES, "<!-- figure: metrics-glossary -->\n<!-- /figure -->\n", tmp_path))
    assert stale(FIGURES, doc, tmp_path) == [] and "| `h1_now` |" in doc.read_text()
    h1 = registry.BY_NAME["h1"]
    changed = tuple(msgspec.structs.replace(m, label="h1 renamed") if m is h1 else m
                    for m in registry.REGISTRY)
    monkeypatch.setattr(registry, "REGISTRY", changed)
    monkeypatch.setattr(registry, "WHOLE_RUN", tuple(m for m in changed if m.scope == "run"))
    assert stale(FIGURES, doc, tmp_path) == ["metrics-glossary"]


def test_unknown_figure_is_a_clear_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["figures", "no-such-figure"]) == 2
    assert "unknown figure 'no-such-figure'" in capsys.readouterr().err


def _sweep(rows: list[tuple[str, int, float, bool]]) -> dict[str, object]:
    return {"threshold": 0.99, "rows": [{"mode": m, "nodes": n, "h1": 1.0, "h2": h2, "overloaded": over}
                                        for m, n, h2, over in rows]}


def test_the_e2_headline_takes_the_largest_kept_up_size_over_a_grid_and_its_extra_points() -> None:
    # An overloaded point does not count, whatever its h2 says.
    real = _sweep([("periodic", 1000, 1.0, False), ("periodic", 3000, 1.0, False),
                   ("delta", 1000, 1.0, False), ("delta", 2000, 0.999, True)])
    grid = _sweep([("periodic", 6000, 1.0, False), ("periodic", 9000, 0.9, False),
                   ("delta", 12000, 1.0, False)])
    extra = _sweep([("delta", 18000, 1.0, False), ("delta", 24000, 0.95, False)])
    text = headline_table(real, grid, extra)
    # No periodic point failed: its limit is at least the largest tried, and the ratio at most.
    assert "| ≥ 3,000 | 1,000 | ≤ 0.33× (below the paper's 1.88×) |" in text
    # The setup the real-time sweep recorded names its row.
    assert "real time over TCP, speed 20, 1 node-host process (" in text
    real["speed"], real["workers"] = 10.0, 2
    assert "real time over TCP, speed 10, 2 node-host processes (" in headline_table(real, grid, extra)
    assert "| 6,000 | 18,000 | 3.00× (at least the paper's 1.88×) |" in text
    extra["rows"] = extra["rows"][:1]  # type: ignore[index]
    assert "| 6,000 | ≥ 18,000 | ≥ 3.00× (at least the paper's 1.88×) |" in headline_table(real, grid, extra)


def test_a_virtual_time_sweep_prints_its_table() -> None:
    # Virtual-time rows have no wall costs and no byte counts: dashes, not a KeyError.
    row = {"mode": "delta", "nodes": 1000, "h1": 1.0, "h2": 1.0, "heartbeats_skipped": 0,
           "rm_cpu_percent": 1.3, "rm_busy_fraction": 0.013, "messages_to_rm_per_node_minute": 1.94,
           "lateness_p99_s": 0.0, "rm_wait_p99_s": 0.0, "overloaded": False}
    text = sweep_table({"threshold": 0.99, "rows": [row],
                        "largest_ok": {"delta": {"nodes": 1000}}, "delta_over_periodic": None})
    assert "| delta | 1,000 | **1.000** | **1.000** | 1.3 | 0.013 | – | – | – | – | 1.94 | – | 0 |" in text
    # No point failed: the limit is at least the sweep's largest n.
    text = sweep_table({"threshold": 0.99, "rows": [row], "delta_over_periodic": None,
                        "largest_ok": {"delta": {"nodes": 1000, "limited_by_sweep": True}}})
    assert "Largest n with h1, h2 ≥ 0.99: **delta ≥ 1,000**" in text


def test_the_costs_table_names_the_item_that_held_the_rm_longest() -> None:
    from emulator.study.renderers.e2 import costs_table

    real = {"mode": "delta", "nodes": 12000, "overloaded": False, "worst_handler": "NodeUpdate",
            "worst_handler_p99_us": 812.4, "worst_handler_max_us": 4210.0, "schedule_pass_p99_us": 1900.0,
            "schedule_pass_max_us": 3100.0, "rm_process_us_per_heartbeat": 21.04,
            "worker_cpu_us_per_node_interval": 9.46}
    virtual = {"mode": "periodic", "nodes": 1000, "overloaded": True}
    text = costs_table({"speed": 10.0, "rows": [real, virtual]})
    assert "| delta | 12,000 | 10.0 | no | 812 (NodeUpdate) | 4,210 | 1,900 / 3,100 | 21.0 | 9.5 |" in text
    assert "| periodic | 1,000 | 10.0 | **yes** | – | – | – / – | – | – |" in text



def test_the_many_core_table_pairs_each_runs_mode_sweeps_and_names_the_busier_process() -> None:
    from emulator.study.renderers.e2 import many_core_table

    def sweep(mode: str, *points: tuple[int, bool, float, float], workers: int = 15) -> dict[str, object]:
        rows = [{"mode": mode, "nodes": n, "h1": 1.0, "h2": 1.0, "overloaded": not ok,
                 "rm_cpu_percent": rm, "worker_cpu_percent": host, "rm_process_us_per_heartbeat": 40.0}
                for n, ok, rm, host in points]
        if not points[-1][1]:
            rows[-1]["overload_reasons"] = ["the RM process ran 0.5 s late (p99)"]
        return {"threshold": 0.99, "speed": 20.0, "workers": workers, "rows": rows}

    text = many_core_table(sweep("periodic", (1000, True, 60, 9), (2000, False, 85, 10)),
                           sweep("delta", (4000, True, 40, 12), (8000, True, 70, 14)))
    assert ("| A | periodic | 2,000 | 1.000 | 1.000 | 85.0 | 10.0 | 40.0 "
            "| **yes** (the RM process ran 0.5 s late (p99)) |") in text
    # Delta never failed: its limit and the ratio are lower bounds.
    assert "* Run A (15 node-host processes, speed 20): periodic 1,000, delta ≥ 8,000, ≥ 8.00×; " in text
    assert ("periodic: busier at the limit RM (RM 60%, node host 9%), "
            "past it RM (RM 85%, node host 10%).") in text
    # A machine with two cores runs one node host: "process", not "processes".
    one = many_core_table(sweep("periodic", (1000, True, 60, 9), workers=1),
                          sweep("delta", (4000, True, 40, 12), workers=1))
    assert "* Run A (1 node-host process, speed 20): " in one
