"""The container image (Dockerfile, .dockerignore, docs/docker.md): always linted here; built only
where a Docker daemon answers (the build pulls python:3.11-slim)."""

from __future__ import annotations

import fnmatch
import json
import re
import shlex
import shutil
import subprocess
import tomllib
from pathlib import Path

import pytest

from emulator.cli.main import build_parser
from emulator.cli.run import scenario_overrides
from emulator.scenario.loader import load_scenario
from emulator.web.app import parse_bind

ROOT = Path(__file__).resolve().parents[2]


def instructions() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) of the Dockerfile, continuation lines joined, comments left out."""
    out: list[tuple[str, str]] = []
    pending = ""
    for raw in (ROOT / "Dockerfile").read_text(encoding="utf-8").splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        line, pending = pending + line, ""
        word, _, rest = line.partition(" ")
        out.append((word.upper(), rest.strip()))
    assert not pending, "Dockerfile ends inside a continued line"
    return out


def only(name: str) -> str:
    found = [args for word, args in instructions() if word == name]
    assert len(found) == 1, f"expected one {name}, found {len(found)}"
    return found[0]


def cmd() -> list[str]:
    argv = json.loads(only("CMD"))  # the exec form: no shell between docker and the emulator
    assert isinstance(argv, list) and all(isinstance(a, str) for a in argv)
    return argv


def copies() -> list[tuple[str, str]]:
    out = []
    for word, args in instructions():
        if word == "COPY":
            *sources, dest = args.split()
            out += [(s.rstrip("/"), dest) for s in sources if not s.startswith("--")]
    return out


def ignored(path: str) -> bool:
    patterns = [p.strip() for p in (ROOT / ".dockerignore").read_text(encoding="utf-8").splitlines()
                if p.strip() and not p.startswith("#")]
    parts = path.split("/")
    prefixes = ["/".join(parts[: i + 1]) for i in range(len(parts))]
    return any(fnmatch.fnmatch(p, pat.removeprefix("**/")) or fnmatch.fnmatch(p, pat)
               for pat in patterns for p in prefixes)


def test_base_image_user_and_port() -> None:
    assert only("FROM") == "python:3.11-slim"
    words = [w for w, _ in instructions()]
    user = only("USER").split(":")[0]
    assert user not in ("root", "0") and words.index("USER") < words.index("CMD")
    created = [a for w, a in instructions() if w == "RUN" and "useradd" in a]
    assert created and re.search(rf"\b{user}\b", created[0])
    assert only("EXPOSE") == "8080"


def test_cmd_is_a_command_line_the_emulator_accepts() -> None:
    argv = cmd()
    assert argv[0] == "emulator"  # the console script pyproject.toml installs
    assert tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]["emulator"]
    args = build_parser().parse_args(argv[1:])  # an unknown flag would exit 2 here
    assert args.command == "run"
    # The scenario is in the image (copied, not ignored) and loads.
    assert any(args.scenario == src or args.scenario.startswith(src + "/") for src, _ in copies())
    assert not ignored(args.scenario)
    load_scenario(ROOT / args.scenario)
    # Serves on every interface of the container, on the port it exposes, and keeps serving.
    host, port = parse_bind(args.serve)
    assert host == "0.0.0.0" and str(port) == only("EXPOSE")
    assert args.linger is None
    # Results go to a directory the (non-root) user owns.
    out = Path(args.out)
    assert out.is_absolute()
    owned = [a for w, a in instructions() if w == "RUN" and "chown" in a]
    assert any(str(out.parent) in a for a in owned)


def test_the_image_gets_the_whole_package_and_nothing_local() -> None:
    sources = {src for src, _ in copies()}
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    packages = [p.rstrip("*") for p in project["tool"]["setuptools"]["packages"]["find"]["include"]]
    assert set(packages) <= sources, "a package pyproject.toml installs is not copied into the image"
    assert {"pyproject.toml", project["project"]["readme"]} <= sources
    for src in sources:
        assert (ROOT / src).exists(), src
        assert not ignored(src), f"{src} is copied but .dockerignore leaves it out of the context"
    for local in (".venv", "runs", ".git", "emulator/__pycache__", "emulator/cli/__pycache__/x.pyc"):
        assert ignored(local), local
    # What setuptools builds in the working directory is not left in the image.
    assert any("pip install ." in a and "egg-info" in a for w, a in instructions() if w == "RUN")


def test_docs_give_the_run_line() -> None:
    doc = (ROOT / "docs" / "docker.md").read_text(encoding="utf-8")
    port = only("EXPOSE")
    assert f"docker run --rm -p {port}:{port} hbemu" in doc
    assert "docker build -t hbemu ." in doc
    assert f"http://localhost:{port}/" in doc
    # Every emulator command the doc runs in the container parses, on a scenario that exists.
    joined = re.sub(r"\s*\\\n\s*", " ", doc)  # continued shell lines
    commands = [shlex.split(c) for c in re.findall(r" hbemu (emulator .*)", joined)]
    assert len(commands) >= 3
    for argv in commands:
        args = build_parser().parse_args(argv[1:])
        scenario = getattr(args, "scenario", None)
        if scenario is not None:
            load_scenario(ROOT / scenario, scenario_overrides(args))


def docker_daemon() -> bool:
    if shutil.which("docker") is None:
        return False
    try:
        return subprocess.run(["docker", "info"], capture_output=True, timeout=20).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


@pytest.mark.slow
@pytest.mark.skipif(not docker_daemon(), reason="no Docker daemon (the Dockerfile is linted above)")
def test_image_builds_and_its_cli_runs() -> None:
    tag = "hbemu-test:latest"
    build = subprocess.run(["docker", "build", "-t", tag, str(ROOT)], capture_output=True, text=True,
                           timeout=1800)
    assert build.returncode == 0, build.stderr[-3000:]
    validate = ["emulator", "validate", "scenarios/quickstart.toml"]
    check = subprocess.run(["docker", "run", "--rm", tag, *validate], capture_output=True, text=True,
                           timeout=300)
    assert check.returncode == 0 and "ok" in check.stdout, check.stderr
    who = subprocess.run(["docker", "run", "--rm", tag, "id", "-u"], capture_output=True, text=True,
                         timeout=300)
    assert who.stdout.strip() == "10001"


def test_dependencies_are_installed_in_a_layer_before_the_code() -> None:
    steps = instructions()
    code = min(i for i, (w, a) in enumerate(steps) if w == "COPY" and a.split()[0] in ("emulator", "rm"))
    deps = [i for i, (w, a) in enumerate(steps) if w == "RUN" and "-c constraints.txt" in a]
    assert deps and deps[0] < code, "a change to the code would reinstall every dependency"
    copied_before = {src for w, a in steps[: deps[0]] if w == "COPY" for src in a.split()[:-1]}
    assert copied_before == {"pyproject.toml", "constraints.txt"}
    package = [a for w, a in steps[code:] if w == "RUN" and "pip install ." in a]
    assert package and "--no-deps" in package[0]  # the versions of the dependency layer stay
