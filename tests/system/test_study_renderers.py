"""The docs' renderers of study output, one registry in the study layer: the figures name them,
and a scenario study's `[[tables]] render = NAME` prints one from its own output."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import msgspec
import pytest

from emulator.cli.figure_table import FIGURES
from emulator.study.renderers import RENDERERS, own_renderers, renderer
from emulator.study.runner import StudyRun
from emulator.study.spec import StudyError
from emulator.study.tables import markdown

ROOT = Path(__file__).resolve().parents[2]
USAGE = ROOT / "docs" / "usage-messages.json"


def _with_tables(tables: list[dict[str, Any]]) -> dict[str, Any]:
    data: dict[str, Any] = msgspec.json.decode(USAGE.read_bytes())
    data["study"]["tables"] = tables
    return data


def test_a_scenario_study_names_a_renderer_of_its_output() -> None:
    data = _with_tables([{"render": "usage-messages", "title": "usage"}])
    text = markdown(data)
    assert text.startswith("**usage**\n\n")
    assert renderer("usage-messages")(data).rstrip("\n") in text
    assert "| scenario | heartbeats | heartbeats sent |" in text


def test_an_unknown_renderer_is_one_clear_error(tmp_path: Path) -> None:
    with pytest.raises(StudyError, match=r"at `tables\[0\]\.render`: `usage-mesages` is not a scenario "
                                         r"study's table; did you mean `usage-messages`\?"):
        markdown(_with_tables([{"render": "usage-mesages"}]))
    # A renderer that reads several files is no table of one study.
    with pytest.raises(StudyError, match=r"`e2-headline` is not a scenario study's table"):
        markdown(_with_tables([{"render": "e2-headline"}]))
    study = (ROOT / "scenarios" / "studies" / "usage-messages.toml").read_text(encoding="utf-8")
    path = tmp_path / "usage.toml"
    path.write_text(study.replace('scenario = "../', f'scenario = "{ROOT / "scenarios"}/', 1)
                    + '\n[[tables]]\nrender = "usage-mesages"\n', encoding="utf-8")
    with pytest.raises(StudyError, match=rf"{path}: at `tables\[1\]\.render`: `usage-mesages`"):
        StudyRun(path, tmp_path / "out.json")


def test_every_figure_of_study_output_renders_through_the_registry() -> None:
    registered = {r.render for r in RENDERERS.values()}
    used = {f.renderer for f in FIGURES.values()} & registered
    assert used == registered  # none registered for nothing
    assert set(own_renderers()) < set(RENDERERS)
    with pytest.raises(KeyError, match="did you mean 'e2-costs'"):
        renderer("e2-cost")
