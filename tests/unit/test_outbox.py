"""The RM sends through one outbox (rm/queues/outbox.py): no other module of ``rm`` calls a
``send`` method itself, so every message to a node passes ``Outbox.send``."""

from __future__ import annotations

import ast
from pathlib import Path

import rm

ROOT = Path(rm.__file__).parent
OUTBOX = ROOT / "queues" / "outbox.py"


def _direct_sends(path: Path) -> list[str]:
    """``x.send(...)`` calls in ``path`` whose receiver is not an outbox (``outbox``, ``_outbox``,
    ``ctx.outbox``, ...), as ``file:line``."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "send":
            receiver = node.func.value
            name = receiver.attr if isinstance(receiver, ast.Attribute) else getattr(receiver, "id", "")
            if name.lstrip("_") != "outbox":
                found.append(f"{path.relative_to(ROOT.parent)}:{node.lineno}")
    return found


def test_only_the_outbox_sends() -> None:
    modules = [p for p in sorted(ROOT.rglob("*.py")) if p != OUTBOX]
    assert len(modules) > 40  # the whole RM was scanned
    assert [site for p in modules for site in _direct_sends(p)] == []
    assert len(_direct_sends(OUTBOX)) == 1  # the one way out: Outbox.send hands the message to its link
