"""E3 as a study at a small scale: the committed study file (two of its modes) at 100 nodes, its
table and its removals plot rendered from the output alone."""

from __future__ import annotations

import csv
from pathlib import Path

import msgspec
import pytest

from emulator.cli.main import main
from emulator.study.renderers.e3 import NotE3, markdown_table, quiet_rate

ROOT = Path(__file__).resolve().parents[2]


def small_e3(tmp_path: Path, nodes: int) -> Path:
    """scenarios/studies/e3.toml with only `ring` and `periodic-no-overload`, scaled to ``nodes``."""
    text = (ROOT / "scenarios" / "studies" / "e3.toml").read_text(encoding="utf-8")
    head, *variants = text.replace('"../', f'"{ROOT}/scenarios/').split("[[variants]]")
    kept = [v for v in variants if v.lstrip().startswith(('name = "ring"', 'name = "periodic-no-overload"'))]
    assert len(kept) == 2
    text = "[[variants]]".join([head, *kept])
    path = tmp_path / "e3-small.toml"
    path.write_text(text.replace("seed = [1]", f"nodes = [{nodes}]\nseed = [1]"), encoding="utf-8")
    return path


def test_small_e3_writes_its_table_and_removals_plot_from_the_study_output(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out, plots = tmp_path / "e3.json", tmp_path / "plots"
    assert main(["study", str(small_e3(tmp_path, 100)), "--out", str(out), "--plots", str(plots),
                 "--jobs", "1", "--quiet"]) == 0
    output = msgspec.json.decode(out.read_bytes())
    ring, calm = output["points"]
    assert ring["metrics"]["crashed_nodes"] == 5 and ring["metrics"]["crashed_removed"] == 5
    assert ring["metrics"]["false_removals"] == 0 and ring["metrics"]["detection_latency_s.p99"] <= 6.0
    assert calm["metrics"]["crashed_removed"] == 5
    # Delta heartbeats: under one message to the RM per node-minute while nothing fails; periodic
    # every 3 s: 20.
    assert 0 < quiet_rate(ring["collected"]) < 1 and quiet_rate(calm["collected"]) == 20
    table = markdown_table(output)
    assert "| delta + `kring` (ours) | 5 | 0 (0) | " in table
    assert "| periodic, no overload | 5 | 0 (0) | " in table
    with (plots / "ring-e3-removals.csv").open(encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    assert sum(int(r["ring"]) for r in rows) == 5
    assert all(int(r["ring"]) == 0 for r in rows if float(r["t_s"]) < 400)
    assert (plots / "ring-e3-removals.png").stat().st_size > 10_000
    # A study that does not keep what the table needs: said, naming the study file.
    output["study"]["collect"] = ["nodes"]
    with pytest.raises(NotE3, match=r"e3-small\.toml: E3's table needs the study to collect "
                       r"false_removed_nodes"):
        markdown_table(output)
