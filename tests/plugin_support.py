"""Make a plug-in discoverable without installing it: a hand-written ``*.dist-info`` (METADATA and
entry_points.txt, what ``pip install`` would write) in a temporary ``sys.path`` entry."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).parent.parent
EXAMPLE = ROOT / "examples" / "hbemu-policy-example"


def fake_install(
    site: Path, monkeypatch: pytest.MonkeyPatch, dist: str, groups: dict[str, dict[str, str]],
) -> None:
    """Declare ``groups`` ({group: {name: "module:attr"}}) as distribution ``dist``'s entry points,
    visible to ``importlib.metadata`` until the test ends."""
    info = site / f"{dist.replace('-', '_')}-0.1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: 0.1.0\n")
    lines = []
    for group, entries in groups.items():
        lines.append(f"[{group}]")
        lines.extend(f"{name} = {value}" for name, value in entries.items())
    (info / "entry_points.txt").write_text("\n".join(lines) + "\n")
    monkeypatch.syspath_prepend(str(site))


def install_example(site: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The example package as `pip install` would make it visible: its code importable and the
    entry points its own pyproject.toml declares."""
    project = tomllib.loads((EXAMPLE / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    monkeypatch.syspath_prepend(str(EXAMPLE))
    fake_install(site, monkeypatch, project["name"], project["entry-points"])
