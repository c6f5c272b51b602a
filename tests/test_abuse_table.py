"""`emulator abuse --table`: docs/security.md's table comes from the run's JSON, not by hand."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from emulator.cli.main import main


def test_the_table_is_built_from_the_figures(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = {"h1": 1.0, "h2": 0.5, "honest_nodes_lost": 3, "rm_rss_mib": {"start": 40.0, "max": 90.5},
           "events_jsonl_bytes": 12_000, "rm_queue_depth_max": 100_008, "rm_queue_dropped": 7}
    figures = {
        "nodes": 200,
        "before": {**run, "h2": 1.0, "honest_nodes_lost": 0, "attacker": {}},
        "during": {"spoof": {**run, "attacker": {"connections": 5, "bytes_sent": 2e9, "cpu_s": 9.0,
                                                 "seconds": 10.0, "fake_ids_reported": 0}}},
    }
    path = tmp_path / "abuse.json"
    path.write_text(json.dumps(figures))
    assert main(["abuse", "--table", str(path)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[2] == "| alone | 1.000 | 1.000 | 0 of 200 | 40.0 → 90.5 | 12 KB | 100,008 / 7 | — |"
    assert out[3] == ("| spoof | 1.000 | 0.500 | 3 of 200 | 40.0 → 90.5 | 12 KB | 100,008 / 7 | "
                      "5 connections, 2 GB sent, 0.90 core |")
