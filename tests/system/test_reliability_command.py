"""`emulator reliability`: each case runs with the invariant checker and the table says what was lost."""

from __future__ import annotations

from pathlib import Path

import msgspec
import pytest

from emulator.cli.main import main


def test_a_case_runs_with_invariants_and_the_table_reports_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["reliability", "--cases", "all-crash", "--fuzz", "0", "--out", str(tmp_path), "--quiet"])
    assert code == 0
    (row,) = msgspec.json.decode((tmp_path / "reliability.json").read_bytes())
    assert row["violation"] is None and row["invariant_checks"] > 0
    # Every node crashed, no watcher survived: the RM still finds all of them, and nothing is lost.
    assert row["crashed"] == row["crashed_removed"] == 20
    assert row["tasks_lost"] == row["tasks_duplicated"] == row["false_removals"] == 0
    capsys.readouterr()
    assert main(["reliability", "--table", str(tmp_path / "reliability.json")]) == 0
    table = capsys.readouterr().out
    assert "| every node crashes: no watcher survives | crash | 20 |" in table
    assert "| 0 / 0 | 20 / 20 | 0 |" in table


def test_an_unknown_case_name_is_a_clear_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["reliability", "--cases", "nope", "--fuzz", "0", "--out", str(tmp_path)]) == 2
    assert "unknown case `nope`" in capsys.readouterr().err
