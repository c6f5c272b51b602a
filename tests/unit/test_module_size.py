"""No module of the project's packages grows past 500 lines: a module that long does two or three
things, and is split by what it does (the packages' layout rule)."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("emulator", "rm", "nodemanager", "ringmon")
MAX_LINES = 500


def test_no_module_over_500_lines() -> None:
    long = {
        str(path.relative_to(ROOT)): n
        for package in PACKAGES
        for path in sorted((ROOT / package).rglob("*.py"))
        if (n := len(path.read_text(encoding="utf-8").splitlines())) > MAX_LINES
    }
    assert not long, f"modules over {MAX_LINES} lines (split them by what they do): {long}"
