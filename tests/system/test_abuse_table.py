"""Tables in the docs come from result files: `emulator abuse --table`, `emulator recovery --table`."""

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


def test_the_recovery_table_is_built_from_recovery_json(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    row = {"nodes": 1000, "mode": "delta", "containers_waiting": 15590, "replay_wall_s": 0.434,
           "journal_records": 48000, "journal_mib": 2.4, "all_nodes_back_s": 5.83,
           "scheduling_resumed_s": 5.9,
           "containers_kept": 15590, "containers_rerun": 0, "tasks_lost": 0, "tasks_duplicated": 0}
    path = tmp_path / "recovery.json"
    path.write_text(json.dumps([row]))
    assert main(["recovery", "--table", str(path)]) == 0
    assert capsys.readouterr().out.splitlines()[2] == (
        "| 1,000 | delta | 15,590 | 0.43 s (48,000 records, 2 MiB) | 5.83 s, 5.90 s | 15,590 / 0 | 0 / 0 |")
