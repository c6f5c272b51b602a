"""A standalone RM process killed for real (SIGKILL) and started again on its run directory takes
the run over from its journal: nothing lost, nothing run twice (real processes, 127.0.0.1)."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import msgspec
import pytest

SCENARIO = """
name = "resume"
[cluster]
nodes = [{ count = 100, cpu = 8, ram_gib = 32 }]
[heartbeat]
mode = "periodic"
interval_s = 3.0
[rm]
expiry_s = 60
[[workload.operations]]
name = "batch"
cpu = 1
ram_gib = 2
tasks = 1200
seconds_mean = 40
seconds_deviation = 10
[[workload.operations]]
name = "later"
cpu = 2
ram_gib = 4
tasks = 300
seconds_mean = 30
submit_at_s = 150
[run]
duration_s = 260
clock = "realtime"
speed = 20
warmup_s = 0
"""


def emulator(*args: str) -> list[str]:
    return [sys.executable, "-m", "emulator", *args]


def start_rm(sc: Path, out: Path, listen: str, *extra: str) -> tuple[subprocess.Popen[str], str, str]:
    """The RM process, its address, and what it printed up to that line."""
    rm = subprocess.Popen(emulator("rm", str(sc), "--listen", listen, "--out", str(out), "--quiet", *extra),
                          stderr=subprocess.PIPE, text=True)
    assert rm.stderr is not None
    lines = []
    for _ in range(3):
        lines.append(rm.stderr.readline())
        m = re.search(r"listening on (\S+:\d+)", lines[-1])
        if m:
            return rm, m[1], "".join(lines)
    rm.kill()
    raise AssertionError(lines)


def stop(*procs: subprocess.Popen[str]) -> None:
    for p in procs:
        if p.poll() is None:
            p.kill()
        p.communicate()


def test_a_killed_rm_process_restarted_on_its_directory_takes_its_run_over(tmp_path: Path) -> None:
    sc = tmp_path / "resume.toml"
    sc.write_text(SCENARIO)
    out = tmp_path / "rm"
    epoch = time.time() + 2
    rm1, address, _ = start_rm(sc, out, "127.0.0.1:0", "--start-at", str(epoch))
    nodes = subprocess.Popen(
        # The loopback RM made the run's secret (no scenario secret); the restarted one keeps it.
        emulator("nodes", "--connect", address, "--scenario", str(sc), "--count", "100", "--start-at",
                 str(epoch), "--credentials-file", str(out / "rm-secret"), "--report",
                 str(tmp_path / "nodes.json"), "--quiet"),
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    rm2 = None
    try:
        time.sleep(epoch + 4 - time.time())  # t = 80 s: the batch half done
        rm1.send_signal(signal.SIGKILL)
        rm1.wait(timeout=10)
        # The same run directory: a second RM process takes it over; another run never shares it
        # (it goes to a directory of its own, as every run into one that holds a run does).
        time.sleep(1)
        rm2, _, said = start_rm(sc, out, address, "--recover")
        assert "resuming the run" in said
        other = subprocess.run(emulator("run", str(sc), "--out", str(out), "--quiet", "--duration", "3"),
                               capture_output=True, text=True, timeout=60, check=False)
        assert f"this run goes to {out}-2/" in other.stderr, other.stderr
        forced = subprocess.run(emulator("run", str(sc), "--out", str(out), "--quiet", "--force"),
                                capture_output=True, text=True, timeout=60, check=False)
        assert forced.returncode == 2 and "in use by another emulator process" in forced.stderr, forced.stderr
        _, err = rm2.communicate(timeout=60)
        assert rm2.returncode == 0, err
        _, nodes_err = nodes.communicate(timeout=60)
        assert nodes.returncode == 0, nodes_err
    finally:
        stop(rm1, nodes, *([rm2] if rm2 is not None else []))

    # Nothing run twice, nothing lost: the nodes launched and finished each task exactly once.
    reports = json.loads((tmp_path / "nodes.json").read_text())
    assert sum(r["counters"]["containers_launched"] for r in reports) == 1500
    assert sum(r["counters"]["containers_finished"] for r in reports) == 1500
    s = json.loads((out / "summary.json").read_text())
    # The summary covers the whole run, not only the last RM process, and says it was resumed.
    assert s["containers_completed"] == 1500 and s["allocations"] == 1500
    assert s["resumed"] is True and 0 < s["containers_completed_by_earlier_processes"] < 1500
    (takeover,) = s["takeovers"]
    (restart,) = s["rm_restarts"]
    assert takeover["died_at_s"] == pytest.approx(restart["crashed_at_s"], abs=1e-3)
    assert takeover["took_over_at_s"] > takeover["died_at_s"]
    assert 60 <= restart["crashed_at_s"] <= 100, restart
    assert restart["operations_recovered"] == 1 and restart["containers_waiting"] > 50
    assert restart["containers_kept"] == restart["containers_waiting"] and restart["containers_rerun"] == 0
    assert s["tasks_requeued"] == 0
    # Each operation submitted once, across both processes; the later one by the second.
    events = [json.loads(line) for line in (out / "events.jsonl").read_text().splitlines()]
    submitted = [e["operation"] for e in events if e["event"] == "operation.submitted"]
    finished = [e["operation"] for e in events if e["event"] == "operation.finished"]
    assert submitted == ["batch", "later"] and sorted(finished) == ["batch", "later"]
    assert json.loads((out / "rm-run.json").read_text())["finished"] is True


def test_recover_needs_an_unfinished_run(tmp_path: Path) -> None:
    sc = tmp_path / "resume.toml"
    sc.write_text(SCENARIO)
    proc = subprocess.run(emulator("rm", str(sc), "--out", str(tmp_path / "empty"), "--recover"),
                          capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode == 2
    assert "--recover:" in proc.stderr and "no unfinished run" in proc.stderr


@pytest.mark.parametrize("changed", ["speed = 10", 'name = "other"'])
def test_resuming_with_another_scenario_or_speed_is_refused(tmp_path: Path, changed: str) -> None:
    sc = tmp_path / "resume.toml"
    sc.write_text(SCENARIO)
    out = tmp_path / "rm"
    out.mkdir()
    record = {"scenario": "resume", "epoch": time.time(), "speed": 20.0, "finished": False}
    (out / "rm-run.json").write_bytes(msgspec.json.encode(record))
    (out / "rm-journal.jsonl").write_text("")
    key = changed.split(" = ")[0]
    text = re.sub(rf"^{key} = .*$", changed, SCENARIO, count=1, flags=re.M)
    sc.write_text(text)
    proc = subprocess.run(emulator("rm", str(sc), "--out", str(out)), capture_output=True, text=True,
                          timeout=60, check=False)
    assert proc.returncode == 2 and "holds an unfinished run of scenario 'resume' at speed 20" in proc.stderr
