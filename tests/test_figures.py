"""Figure tables in the README and docs/ come from the committed result files, not from memory."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from emulator.cli.main import main
from emulator.results.figures import FIGURES, refresh, stale

ROOT = Path(__file__).resolve().parent.parent
DOCS_WITH_FIGURES = [ROOT / "README.md", ROOT / "docs" / "results.md", ROOT / "docs" / "compare.md",
                     ROOT / "docs" / "traces.md",
                     ROOT / "docs" / "borg.md", ROOT / "docs" / "packing.md"]


@pytest.mark.parametrize("path", DOCS_WITH_FIGURES, ids=lambda p: p.name)
def test_committed_tables_match_their_result_files(path: Path) -> None:
    assert stale(path, ROOT) == [], f"run: emulator figures --write {path.relative_to(ROOT)}"


def test_a_changed_result_file_makes_its_table_stale(tmp_path: Path) -> None:
    (tmp_path / "docs").mkdir()
    src = ROOT / FIGURES["e3"].source
    shutil.copy(src, tmp_path / FIGURES["e3"].source)
    doc = tmp_path / "doc.md"
    doc.write_text(refresh("intro\n<!-- figure: e3 -->\n<!-- /figure -->\nafter\n", tmp_path))
    assert stale(doc, tmp_path) == []
    assert "| delta + `kring` (ours) | 375 |" in doc.read_text()
    data = (tmp_path / FIGURES["e3"].source).read_text().replace('"removals": 375', '"removals": 376', 1)
    (tmp_path / FIGURES["e3"].source).write_text(data)
    assert stale(doc, tmp_path) == ["e3"]


def test_unknown_figure_is_a_clear_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["figures", "no-such-figure"]) == 2
    assert "unknown figure 'no-such-figure'" in capsys.readouterr().err
