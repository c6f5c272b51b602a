"""A run directory records how it was made (run.json, scenario.toml, never a secret), and
`emulator rerun` reproduces it: in virtual time the same summary.json, byte for byte."""

from __future__ import annotations

import json
import tomllib
from datetime import datetime
from pathlib import Path

import msgspec
import pytest

from emulator.cli.main import main
from emulator.results.record import WALL_CLOCK_FIELDS, load_record, scenario_data, source_commit, to_toml
from emulator.results.recording import compare_summaries
from emulator.scenario.loader import load_scenario, scenario_from_dict

SCENARIOS = Path(__file__).parents[2] / "scenarios"
QUICKSTART = SCENARIOS / "quickstart.toml"
SECRET = "s3cret-Vb82nQ"
SMALL = """
name = "small"
[cluster]
nodes = [{{ count = 4, cpu = 8, ram_gib = 16 }}]
[rm]
{rm}
[[workload.operations]]
name = "job"
cpu = 1
ram_gib = 2
tasks = 40
seconds_mean = 20
seconds_deviation = 5
loop = true
[run]
duration_s = 120
warmup_s = 30
seed = 3
"""


def quick_run(out: Path, *extra: str) -> int:
    return main(["run", str(QUICKSTART), "--duration", "400", "--out", str(out), "--quiet", *extra])


def test_run_json_and_scenario_toml(tmp_path: Path) -> None:
    out = tmp_path / "run"
    assert quick_run(out, "--set", "scheduler.policy=fifo", "--seed", "11") == 0
    record = load_record(out)
    assert record.command == "run" and record.scenario_file == str(QUICKSTART)
    assert record.overrides == {"scheduler.policy": "fifo", "run.seed": 11, "run.duration_s": 400.0}
    assert record.adjustments == []  # 400 s is longer than the file's 300 s warm-up
    assert (record.seed, record.clock, record.exit_status) == (11, "virtual", 0)
    assert record.version and record.commit  # "unknown" outside a git checkout, never empty
    assert record.machine.cores and record.machine.python.startswith("3.")
    assert datetime.fromisoformat(record.started_at).tzinfo is not None
    assert record.wall_s is not None and record.wall_s > 0
    # scenario.toml is the scenario as it ran: the file with every override applied.
    data = tomllib.loads((out / "scenario.toml").read_text())
    assert data["scheduler"]["policy"] == "fifo" and data["run"]["seed"] == 11
    ran = load_scenario(QUICKSTART, {"scheduler.policy": "fifo", "run.seed": 11, "run.duration_s": 400.0})
    assert load_scenario(out / "scenario.toml") == ran


@pytest.mark.parametrize("path", sorted(SCENARIOS.glob("*.toml")), ids=lambda p: p.name)
def test_every_shipped_scenario_survives_the_toml_writer(path: Path) -> None:
    sc = load_scenario(path)
    data, _ = scenario_data(sc, path, {})
    back = scenario_from_dict(tomllib.loads(to_toml(data)), str(path), path.parent, machine_bytes=1 << 50)
    assert back == sc


def files_text(out: Path) -> str:
    return "".join(f.read_text(errors="replace") for f in out.iterdir() if f.is_file())


def test_no_secret_is_written(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # From a variable: the record names the variable, never its value.
    monkeypatch.setenv("HBEMU_TEST_RECORD_SECRET", SECRET)
    by_env = tmp_path / "env.toml"
    by_env.write_text(SMALL.format(rm='credentials_env = "HBEMU_TEST_RECORD_SECRET"'))
    assert main(["run", str(by_env), "--out", str(tmp_path / "a"), "--quiet"]) == 0
    assert SECRET not in files_text(tmp_path / "a")
    rm = tomllib.loads((tmp_path / "a" / "scenario.toml").read_text())["rm"]
    assert (rm["credentials"], rm["credentials_env"]) == ("", "HBEMU_TEST_RECORD_SECRET")
    assert load_scenario(tmp_path / "a" / "scenario.toml").rm.credentials == SECRET
    # From a relative file: recorded as an absolute path, so a rerun from anywhere finds it.
    (tmp_path / "secret.txt").write_text(SECRET)
    by_file = tmp_path / "file.toml"
    by_file.write_text(SMALL.format(rm='credentials_file = "secret.txt"'))
    assert main(["run", str(by_file), "--out", str(tmp_path / "b"), "--quiet"]) == 0
    assert SECRET not in files_text(tmp_path / "b")
    rm = tomllib.loads((tmp_path / "b" / "scenario.toml").read_text())["rm"]
    assert rm["credentials_file"] == str(tmp_path / "secret.txt")
    # Inline, in the file or with --set: dropped, and the record says so.
    inline = tmp_path / "inline.toml"
    inline.write_text(SMALL.format(rm=f'credentials = "{SECRET}"'))
    assert main(["run", str(inline), "--out", str(tmp_path / "c"), "--quiet"]) == 0
    assert main(["run", str(by_env), "--out", str(tmp_path / "d"), "--quiet",
                 "--set", f"rm.credentials={SECRET}", "--set", "rm.credentials_env="]) == 0
    for d in ("c", "d"):
        assert SECRET not in files_text(tmp_path / d)
        assert load_record(tmp_path / d).secrets_omitted
    assert load_record(tmp_path / "d").overrides["rm.credentials"] == "<omitted>"


def test_rerun_reproduces_the_summary(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "orig"
    assert quick_run(out, "--set", "heartbeat.mode=delta") == 0
    capsys.readouterr()
    assert main(["rerun", str(out), "--quiet"]) == 0
    again = tmp_path / "orig-rerun"
    # Virtual time: summary.json is byte-identical; wall-clock figures live in timing.json.
    assert (again / "summary.json").read_bytes() == (out / "summary.json").read_bytes()
    a, b = (json.loads((d / "timing.json").read_text()) for d in (again, out))
    assert a["scheduler_decision_us"]["count"] == b["scheduler_decision_us"]["count"] > 0
    assert not set(WALL_CLOCK_FIELDS) & set(json.loads((out / "summary.json").read_text()))


def test_rerun_says_when_results_differ(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "orig"
    assert quick_run(out) == 0
    summary = msgspec.json.decode((out / "summary.json").read_bytes())
    summary["allocations"] += 1
    (out / "summary.json").write_bytes(msgspec.json.format(msgspec.json.encode(summary)) + b"\n")
    capsys.readouterr()
    assert main(["rerun", str(out), "--out", str(tmp_path / "again"), "--quiet"]) == 1
    err = capsys.readouterr().err
    assert "results DIFFER" in err and "allocations" in err


def test_rerun_needs_a_recorded_directory(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["rerun", str(tmp_path)]) == 2
    assert "no run.json: not the directory of an `emulator run`" in capsys.readouterr().err
    out = tmp_path / "orig"
    assert quick_run(out) == 0
    assert main(["rerun", str(out), "--out", str(out)]) == 2
    assert "would overwrite the run it reproduces" in capsys.readouterr().err


def test_wall_clock_fields_are_the_only_ones_ignored() -> None:
    base = {"h1": 0.5, "costs": {"rm_cpu_percent": 10}, "lag": {"p99": 0.1}, "overloaded": False}
    other = {**base, "costs": {"rm_cpu_percent": 12}, "lag": {"p99": 0.2}, "overloaded": True}
    assert compare_summaries(msgspec.json.encode(base), msgspec.json.encode(other)) == (True, [])
    changed = {**other, "h1": 0.6}
    assert compare_summaries(msgspec.json.encode(base), msgspec.json.encode(changed)) == (False, ["h1"])


def test_commit_names_a_changed_checkout_dirty_and_writes_nothing_into_it(tmp_path: Path) -> None:
    import subprocess

    def git(*args: str) -> None:
        subprocess.run(["git", "-C", str(tmp_path), "-c", "user.name=t", "-c", "user.email=t@t", *args],
                       check=True, capture_output=True)

    git("init", "-q")
    (tmp_path / "a.txt").write_text("one\n")
    git("add", "a.txt")
    git("commit", "-q", "-m", "one")
    index = tmp_path / ".git" / "index"
    clean = source_commit(tmp_path)
    assert clean != "unknown" and not clean.endswith("-dirty")
    (tmp_path / "a.txt").write_text("two\n")  # changed: its stat no longer matches the index
    before = index.read_bytes()
    assert source_commit(tmp_path) == f"{clean}-dirty"
    assert index.read_bytes() == before  # the run wrote nothing into the checkout's index
    (tmp_path / "a.txt").write_text("one\n")  # the same content again, a newer stat
    assert source_commit(tmp_path) == clean
    assert index.read_bytes() == before


def test_commit_is_unknown_outside_a_checkout(tmp_path: Path) -> None:
    assert source_commit(tmp_path) == "unknown"
    assert source_commit(tmp_path / "missing") == "unknown"


def test_an_rm_process_records_its_run(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    scenario = tmp_path / "rm.toml"
    scenario.write_text(SMALL.format(rm="").replace("seed = 3", "seed = 3\nspeed = 20"))
    out = tmp_path / "rm"
    assert main(["rm", str(scenario), "--duration", "2", "--out", str(out), "--quiet"]) == 0
    record = load_record(out)
    assert (record.command, record.exit_status, record.clock) == ("rm", 0, "realtime")
    assert record.overrides == {"run.clock": "realtime", "transport.kind": "tcp", "run.duration_s": 2.0}
    assert record.adjustments and "scaled from 30 to 0.5 s" in record.adjustments[0]
    # The run's own secret (rm-secret, for its nodes) is not copied into the record.
    secret = (out / "rm-secret").read_text().strip()
    assert secret not in (out / "run.json").read_text() + (out / "scenario.toml").read_text()
    capsys.readouterr()
    assert main(["rerun", str(out)]) == 2
    assert "made by `emulator rm`" in capsys.readouterr().err


def test_a_study_point_can_be_rerun(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # Every run directory records itself, also those a study keeps (here E3's `ring` at 100 nodes).
    from tests.system.test_faults_e3 import small_e3

    study = small_e3(tmp_path, 100).read_text(encoding="utf-8")
    ring_only = study.split('[[variants]]\nname = "periodic-no-overload"')[0]
    (tmp_path / "ring.toml").write_text(ring_only + "[axes]\nnodes = [100]\nseed = [1]\n", encoding="utf-8")
    assert main(["study", str(tmp_path / "ring.toml"), "--out", str(tmp_path / "e3.json"), "--runs",
                 str(tmp_path / "e3"), "--jobs", "1", "--quiet"]) == 0
    point = tmp_path / "e3" / "ring-nodes=100-seed=1"
    record = load_record(point)
    assert record.command == "run" and record.exit_status == 0
    assert main(["rerun", str(point), "--quiet"]) == 0
    assert "byte-identical" in capsys.readouterr().err
