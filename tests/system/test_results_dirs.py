"""A run never overwrites an earlier run unasked: a second run into a results directory that holds
one goes to DIR-2 (said on stderr), ``--force`` replaces it; every run says where its results are,
``--quiet`` too; `emulator rerun` likewise (DIR-rerun, then DIR-rerun-2)."""

from __future__ import annotations

from pathlib import Path

import pytest

from emulator.cli.main import main

SMALL = """
name = "small"
[cluster]
nodes = [{ count = 2, cpu = 8, ram_gib = 16 }]
[[workload.operations]]
name = "job"
cpu = 1
ram_gib = 2
tasks = 10
seconds_mean = 20
loop = true
[run]
duration_s = 60
warmup_s = 10
seed = 3
"""


@pytest.fixture
def scenario(tmp_path: Path) -> Path:
    path = tmp_path / "small.toml"
    path.write_text(SMALL, encoding="utf-8")
    return path


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    assert main([*argv, "--quiet"]) == 0
    return capsys.readouterr().err


def test_a_second_run_goes_to_a_new_directory(tmp_path: Path, scenario: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "runs" / "small"
    err = _run(capsys, "run", str(scenario), "--out", str(out))
    assert f"results in {out}/" in err  # --quiet still says where
    first = (out / "run.json").read_bytes()
    err = _run(capsys, "run", str(scenario), "--out", str(out), "--seed", "4")
    second = out.with_name("small-2")
    assert f"{out}/ holds an earlier run; this run goes to {second}/" in err
    assert f"results in {second}/" in err
    assert (out / "run.json").read_bytes() == first  # the earlier run untouched
    assert (second / "summary.json").exists()
    _run(capsys, "run", str(scenario), "--out", str(out))
    assert (out.with_name("small-3") / "summary.json").exists()


def test_force_replaces_the_earlier_run(tmp_path: Path, scenario: Path,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "r"
    _run(capsys, "run", str(scenario), "--out", str(out))
    (out / "stale.txt").write_text("from the earlier run", encoding="utf-8")
    err = _run(capsys, "run", str(scenario), "--out", str(out), "--force")
    assert f"results in {out}/" in err and "holds an earlier run" not in err
    assert not (out / "stale.txt").exists()  # replaced, not mixed with the new run's files
    assert not out.with_name("r-2").exists()


def test_force_never_empties_a_directory_without_a_run(tmp_path: Path, scenario: Path,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "mine"
    out.mkdir()
    (out / "notes.txt").write_text("keep me", encoding="utf-8")
    _run(capsys, "run", str(scenario), "--out", str(out), "--force")
    assert (out / "notes.txt").read_text(encoding="utf-8") == "keep me"


def test_rerun_never_overwrites_an_earlier_rerun(tmp_path: Path, scenario: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "r"
    _run(capsys, "run", str(scenario), "--out", str(out))
    err = _run(capsys, "rerun", str(out))
    assert f"results in {tmp_path / 'r-rerun'}/" in err and "results match" in err
    err = _run(capsys, "rerun", str(out))
    assert f"results in {tmp_path / 'r-rerun-2'}/" in err and "results match" in err
    assert (tmp_path / "r-rerun" / "summary.json").exists()


def test_the_api_never_overwrites_an_earlier_run(tmp_path: Path, scenario: Path) -> None:
    import emulator

    first = emulator.run(scenario, out=tmp_path / "api")
    second = emulator.run(scenario, out=tmp_path / "api", seed=4)
    assert first.run_dir == tmp_path / "api" and second.run_dir == tmp_path / "api-2"
    assert emulator.load(tmp_path / "api").summary == first.summary
