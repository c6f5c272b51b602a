"""Figure tables in the README and docs, regenerated from the committed result files.

A table in a markdown file sits between ``<!-- figure: NAME -->`` and ``<!-- /figure -->``;
``emulator figures --write FILE`` replaces each such block with the table rendered from NAME's
result file, and ``--check`` fails when a block differs from its file (hand-edited or stale).
The figures themselves (result file, renderer, command) are a table the command passes in
(emulator/cli/figure_table.py), so this layer imports none of the experiments that render them.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import NamedTuple

import msgspec


class Figure(NamedTuple):
    source: str  # result file, relative to the repository root
    renderer: Callable[..., str]  # takes the decoded file(s), returns markdown
    command: str  # what regenerates the source
    extra: tuple[str, ...] = ()  # more result files, passed to the renderer after the first


_BLOCK = re.compile(r"(<!-- figure: (?P<name>[\w.-]+) -->\n)(?P<body>.*?)(<!-- /figure -->)", re.S)


class FigureError(Exception):
    """A block names an unknown figure, or its result file is missing or unreadable."""


def render(figures: Mapping[str, Figure], name: str, root: Path = Path(".")) -> str:
    fig = figures.get(name)
    if fig is None:
        raise FigureError(f"unknown figure {name!r} (known: {', '.join(sorted(figures))})")
    if not fig.source:  # rendered from code (the metrics registry), not from a result file
        note = f"<sub>Generated from `{fig.renderer.__module__}`; regenerate with `{fig.command}`.</sub>"
        return fig.renderer().rstrip("\n") + f"\n\n{note}\n"
    docs = []
    for source in (fig.source, *fig.extra):
        path = root / source
        try:
            docs.append(msgspec.json.decode(path.read_bytes()))
        except (OSError, msgspec.DecodeError) as e:
            raise FigureError(f"figure {name}: cannot read {path}: {e} (regenerate: {fig.command})") from e
    sources = ", ".join(f"`{s}`" for s in (fig.source, *fig.extra))
    note = f"<sub>From {sources}; regenerate with `{fig.command}`.</sub>"
    return fig.renderer(*docs).rstrip("\n") + f"\n\n{note}\n"


def refresh(figures: Mapping[str, Figure], text: str, root: Path = Path(".")) -> str:
    """``text`` with every figure block re-rendered."""
    return _BLOCK.sub(lambda m: m.group(1) + render(figures, m.group("name"), root) + m.group(4), text)


def blocks(text: str) -> list[str]:
    return [m.group("name") for m in _BLOCK.finditer(text)]


def stale(figures: Mapping[str, Figure], path: Path, root: Path = Path(".")) -> list[str]:
    """Names of the figure blocks in ``path`` that differ from their result files."""
    text = path.read_text(encoding="utf-8")
    out = []
    for m in _BLOCK.finditer(text):
        if m.group("body") != render(figures, m.group("name"), root):
            out.append(m.group("name"))
    return out
