"""docs/usage.md's `emulator explain` sample is what the command prints."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from emulator.cli.main import main

ROOT = Path(__file__).resolve().parents[2]
USAGE = ROOT / "docs" / "usage.md"
SAMPLE = re.compile(r"<!-- explain: emulator (.*?) -->\n```text\n(.*?)```\n", re.S)


def test_the_usage_doc_shows_what_explain_prints(capsys: pytest.CaptureFixture[str],
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    ((command, shown),) = SAMPLE.findall(USAGE.read_text(encoding="utf-8"))
    monkeypatch.chdir(ROOT)
    assert main(shlex.split(command)) == 0
    printed = capsys.readouterr().out
    assert shown == printed, f"update docs/usage.md's block to what `emulator {command}` prints:\n{printed}"
