"""The README as users read it: short, and its first-run transcript is what `make run` prints."""

from __future__ import annotations

import fnmatch
import re
from pathlib import Path

import pytest

from emulator.cli.main import main

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
# `make run`'s command (Makefile): the README's transcript is its output.
MAKE_RUN = ["run", "scenarios/quickstart.toml", "--out", "runs/quickstart"]
WALL = re.compile(r"(│ wall time \(s\)\s+│)\s*[\d.,]+ │")


def quickstart_transcript(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                          monkeypatch: pytest.MonkeyPatch) -> str:
    """What `make run` prints in a 100-column terminal, less the progress bar: the run's header line
    (stderr), the tables (stdout) and where the results are (stderr)."""
    monkeypatch.setenv("COLUMNS", "100")
    # As a user's `make run`: not with the test suite's invariant checks (their counts add rows).
    monkeypatch.delenv("HBEMU_CHECK_INVARIANTS", raising=False)
    (tmp_path / "scenarios").mkdir()
    quickstart = (ROOT / "scenarios" / "quickstart.toml").read_bytes()
    (tmp_path / "scenarios" / "quickstart.toml").write_bytes(quickstart)
    monkeypatch.chdir(tmp_path)
    assert main(MAKE_RUN) == 0
    captured = capsys.readouterr()
    err = captured.err.splitlines()
    lines = [err[0], *captured.out.splitlines(), err[-1]]
    return "\n".join(line.rstrip() for line in lines) + "\n"


def readme_transcript() -> str:
    text = README.read_text(encoding="utf-8")
    block = text.split("## Your first run", 1)[1].split("```", 2)[1]
    return block.removeprefix("text").lstrip("\n")


def test_the_readme_shows_what_make_run_prints(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    printed = quickstart_transcript(tmp_path, capsys, monkeypatch)
    # Only the wall time differs from run to run (and machine to machine).
    assert WALL.sub(r"\1 - │", readme_transcript()) == WALL.sub(r"\1 - │", printed), (
        "update README.md's block to this run's output (COLUMNS=100 emulator run scenarios/quickstart.toml "
        "--out runs/quickstart):\n" + printed)


def test_the_readme_is_short_and_says_its_two_commands() -> None:
    text = README.read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 250
    assert "make run" in text and "make test" in text
    assert "make test" in (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert text.index("## Glossary") < text.index("## Development")


def test_every_shipped_scenario_is_in_the_readme_table() -> None:
    text = README.read_text(encoding="utf-8")
    table = text.split("## Shipped scenarios", 1)[1].split("\n## ", 1)[0]
    named = re.findall(r"`([\w*./-]+\.toml)`", table)
    for path in sorted((ROOT / "scenarios").rglob("*.toml")):
        name = path.relative_to(ROOT / "scenarios").as_posix()
        assert any(fnmatch.fnmatch(name, n) for n in named), f"scenarios/{name}: not in the README's table"
