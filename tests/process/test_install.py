"""Installing like a library: pyproject.toml gives compatible ranges (no exact pins that would fight
an existing environment), constraints.txt the exact versions tested, and `make run` installs the
runtime dependencies only (with those versions), `make test` the test tools too."""

from __future__ import annotations

import shutil
import subprocess
import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).parents[2]
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]


def pins() -> dict[str, str]:
    out: dict[str, str] = {}
    for line in (ROOT / "constraints.txt").read_text(encoding="utf-8").splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            name, sep, version = line.partition("==")
            assert sep and version, f"constraints.txt: {line!r} is not NAME==VERSION"
            out[canonicalize_name(name)] = version
    return out


def requirements() -> list[Requirement]:
    extras = PROJECT["optional-dependencies"]
    return [Requirement(r) for r in (*PROJECT["dependencies"], *extras["test"], *extras["cluster"],
                                     *extras["pandas"])]


def test_runtime_dependencies_are_ranges_not_pins() -> None:
    for req in map(Requirement, PROJECT["dependencies"]):
        ops = {spec.operator for spec in req.specifier}
        assert ops and not ops & {"==", "==="}, f"{req}: an exact pin breaks installing beside other packages"


def test_every_dependency_is_pinned_to_a_version_its_range_accepts() -> None:
    pinned = pins()
    for req in requirements():
        name = canonicalize_name(req.name)
        assert name in pinned, f"{req.name}: not in constraints.txt"
        assert req.specifier.contains(pinned[name]), f"constraints.txt {name}=={pinned[name]} outside {req}"


def _make(target: str, venv: Path) -> list[str]:
    proc = subprocess.run(["make", "-n", target, f"VENV={venv}"], cwd=ROOT, capture_output=True, text=True,
                          timeout=30, check=True)
    lines = proc.stdout.splitlines()
    return [line for line in lines if "pip install" in line and "--upgrade pip" not in line]


@pytest.mark.skipif(shutil.which("make") is None, reason="no make")
def test_make_run_installs_the_runtime_only_and_make_test_the_test_tools(tmp_path: Path) -> None:
    run = _make("run", tmp_path / "venv")
    assert len(run) == 1 and "-c constraints.txt" in run[0], run
    assert run[0].rstrip().endswith("-e ."), run  # no extra: no test tools in `make run`'s venv
    test = _make("test", tmp_path / "venv")
    assert len(test) == 1 and "-c constraints.txt" in test[0] and "'.[test]'" in test[0], test
