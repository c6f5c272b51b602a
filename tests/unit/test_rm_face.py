"""The RM's public face (rm/__init__.py): every public name resolves, importing the protocol alone
does not load the RM, and the import contract that holds the harness to the face covers every
room of ``rm``."""

from __future__ import annotations

import pkgutil
import subprocess
import sys
import tomllib
from pathlib import Path

import rm

ROOT = Path(__file__).resolve().parents[2]


def test_every_public_name_resolves() -> None:
    assert "ResourceManager" in rm.__all__ and "sbp" in rm.__all__
    for name in rm.__all__:
        assert getattr(rm, name) is not None, name
    assert rm.ResourceManager.__module__ == "rm.shell.manager"


def test_importing_the_protocol_does_not_load_the_rm() -> None:
    code = "import sys, rm.protocol; print(sorted(m for m in sys.modules if m.startswith('rm.')))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         cwd=ROOT).stdout
    assert out.strip() == "['rm.protocol']"


def test_the_face_contract_forbids_every_room_but_the_protocol() -> None:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    contract = next(c for c in config["tool"]["importlinter"]["contracts"]
                    if c["source_modules"] == ["emulator"] and c["type"] == "forbidden")
    children = {f"rm.{m.name}" for m in pkgutil.iter_modules(rm.__path__)}
    assert set(contract["forbidden_modules"]) == children - {"rm.protocol"}
