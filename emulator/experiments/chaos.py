"""A chaos run across real processes: a standalone RM (``emulator rm``) and node workers
(``emulator nodes``, one worker process each) over TCP on 127.0.0.1, while a seeded script freezes
a worker (SIGSTOP/SIGCONT), kills the RM (SIGKILL) and starts it again on its run directory, kills a
worker and starts its nodes again, and freezes the RM, each at a random moment of its window.

Then it checks what the run promises: nothing lost (every operation finished, every task completed
in the whole run's figures across RM processes), nothing run twice (no more completions than
tasks), and every freeze reported as a stall by the process that was frozen (the RM's summary, the
workers' reports). ``python -m emulator.experiments.chaos --nodes 20000`` is the hand run at scale
(docs/reliability.md); tests/process/test_chaos.py runs a small one.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import msgspec

SCENARIO = """
name = "chaos"
[cluster]
nodes = [{{ count = {nodes}, cpu = 8, ram_gib = 32 }}]
[heartbeat]
mode = "periodic"
interval_s = 1.0
[rm]
expiry_s = 4
[[workload.operations]]
name = "batch"
cpu = 1
ram_gib = 2
tasks = {tasks}
seconds_mean = 30
seconds_deviation = 8
[run]
duration_s = {duration}
clock = "realtime"
speed = {speed}
warmup_s = 0
"""

# Wall seconds from t = 0 at which each act may fall (as fractions of the run's wall length).
# The last act leaves half the run for the work it threw back (a frozen RM removes every node).
WINDOWS = {"freeze_worker": (0.08, 0.15), "kill_rm": (0.20, 0.28), "kill_worker": (0.33, 0.40),
           "freeze_rm": (0.45, 0.52)}
START_MARGIN_S = 3.0  # wall s between starting the processes and t = 0


class Act(msgspec.Struct, frozen=True):
    kind: str  # freeze_worker | kill_rm | kill_worker | freeze_rm
    at_wall_s: float  # after t = 0
    target: int  # the worker (node process) index; 0 for the RM
    hold_wall_s: float  # how long frozen, or how long dead before the restart


class ChaosResult(msgspec.Struct):
    acts: list[Act]
    tasks: int
    completed: int
    operations_finished: int
    rm_exit: int
    stalls_rm: list[tuple[str, float, float]]
    stalls_workers: dict[int, list[tuple[float, float]]]
    problems: list[str]


def plan(seed: int, wall_s: float, workers: int) -> list[Act]:
    """The acts, at seeded moments of their windows; the frozen and the killed worker differ."""
    rng = random.Random(seed)
    frozen, killed = rng.sample(range(workers), 2)
    acts = []
    for kind, (lo, hi) in WINDOWS.items():
        target = frozen if kind == "freeze_worker" else killed if kind == "kill_worker" else 0
        at, hold = round(rng.uniform(lo, hi) * wall_s, 3), round(rng.uniform(0.5, 0.8), 3)
        acts.append(Act(kind, at, target, hold))
    return acts


def _emulator(*args: str) -> list[str]:
    return [sys.executable, "-m", "emulator", *args]


def _child(pid: int) -> int:
    """The one worker process of an ``emulator nodes`` process (from /proc)."""
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        for entry in Path("/proc").iterdir():
            if entry.name.isdigit():
                try:
                    stat = (entry / "stat").read_text()
                except OSError:
                    continue
                if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                    return int(entry.name)
        time.sleep(0.05)
    raise RuntimeError(f"emulator nodes {pid} started no worker process")


class Chaos:
    def __init__(
        self, out: Path, nodes: int, workers: int, seed: int, speed: float, duration_s: float
    ) -> None:
        self.out = out
        self.nodes = nodes
        self.workers = workers
        self.speed = speed
        self.duration_s = duration_s
        self.tasks = nodes * 12  # ~45 emulated s of work at full occupancy, more with the reruns
        self.acts = plan(seed, duration_s / speed, workers)
        out.mkdir(parents=True, exist_ok=True)
        self.scenario = out / "chaos.toml"
        text = SCENARIO.format(nodes=nodes, tasks=self.tasks, duration=duration_s, speed=speed)
        self.scenario.write_text(text)
        self.rm_dir = out / "rm"
        self.epoch = time.time() + START_MARGIN_S
        self.procs: list[subprocess.Popen[bytes]] = []
        self.address = ""

    def _start_rm(self, *extra: str) -> subprocess.Popen[bytes]:
        rm = subprocess.Popen(
            _emulator("rm", str(self.scenario), "--listen", self.address or "127.0.0.1:0", "--out",
                      str(self.rm_dir), "--start-at", str(self.epoch), "--quiet", *extra),
            stderr=subprocess.PIPE,
        )
        self.procs.append(rm)
        assert rm.stderr is not None
        said = b""
        for _ in range(4):
            said += rm.stderr.readline()
            m = re.search(rb"listening on (\S+:\d+)", said)
            if m:
                self.address = m[1].decode()
                return rm
        rm.kill()
        raise RuntimeError(f"the RM did not start: {said.decode(errors='replace')}")

    def _start_nodes(self, index: int, life: int) -> subprocess.Popen[bytes]:
        per = self.nodes // self.workers
        first = index * per
        count = per if index < self.workers - 1 else self.nodes - first
        report = self.out / f"nodes-{index}-{life}.json"
        proc = subprocess.Popen(
            _emulator("nodes", "--connect", self.address, "--scenario", str(self.scenario), "--first-id",
                      str(first), "--count", str(count), "--start-at", str(self.epoch), "--credentials-file",
                      str(self.rm_dir / "rm-secret"), "--report", str(report), "--quiet"),
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
        )
        self.procs.append(proc)
        return proc

    def run(self) -> ChaosResult:
        try:
            return self._run()
        finally:
            for p in self.procs:
                if p.poll() is None:
                    os.kill(p.pid, signal.SIGCONT)
                    p.kill()
                p.communicate()

    def _at(self, wall_s: float) -> None:
        time.sleep(max(0.0, self.epoch + wall_s - time.time()))

    def _run(self) -> ChaosResult:
        rm = self._start_rm()
        hosts = [self._start_nodes(i, 0) for i in range(self.workers)]
        workers = [_child(h.pid) for h in hosts]
        for act in self.acts:
            self._at(act.at_wall_s)
            if act.kind == "freeze_worker":
                os.kill(workers[act.target], signal.SIGSTOP)
                time.sleep(act.hold_wall_s)
                os.kill(workers[act.target], signal.SIGCONT)
            elif act.kind == "freeze_rm":
                os.kill(rm.pid, signal.SIGSTOP)
                time.sleep(act.hold_wall_s)
                os.kill(rm.pid, signal.SIGCONT)
            elif act.kind == "kill_rm":
                rm.kill()
                rm.wait(timeout=10)
                time.sleep(act.hold_wall_s)
                rm = self._start_rm("--recover")
            else:
                os.kill(workers[act.target], signal.SIGKILL)
                hosts[act.target].wait(timeout=10)
                time.sleep(act.hold_wall_s)
                hosts[act.target] = self._start_nodes(act.target, 1)
                workers[act.target] = _child(hosts[act.target].pid)
        wall = self.duration_s / self.speed
        _, err = rm.communicate(timeout=wall + 60)
        for h in hosts:
            h.communicate(timeout=60)
        return self._check(rm.returncode, err.decode(errors="replace"))

    def _check(self, rm_exit: int, rm_err: str) -> ChaosResult:
        problems: list[str] = []
        if rm_exit not in (0, 4):
            problems.append(f"the RM exited {rm_exit}: {rm_err.strip()[-500:]}")
        s: dict[str, Any] = json.loads((self.rm_dir / "summary.json").read_text())
        events = [json.loads(line) for line in (self.rm_dir / "events.jsonl").read_text().splitlines()]
        finished = sum(1 for e in events if e["event"] == "operation.finished")
        completed = s["containers_completed"]
        if finished != 1 or completed < self.tasks:
            problems.append(f"work lost: {completed} of {self.tasks} tasks completed, {finished} of 1 "
                            "operations finished")
        if completed > self.tasks:
            problems.append(f"work run twice: {completed} completions of {self.tasks} tasks")
        rm_stalls = [tuple(x) for x in s.get("lag", {}).get("stalls", [])]
        worker_stalls: dict[int, list[tuple[float, float]]] = {}
        for path in self.out.glob("nodes-*-*.json"):
            index = int(path.stem.split("-")[1])
            for report in json.loads(path.read_text()):
                worker_stalls.setdefault(index, []).extend(tuple(w) for w in report["loop_stalls"]["stalls"])
        for act in self.acts:
            if not act.kind.startswith("freeze"):
                continue
            frozen = act.hold_wall_s * self.speed
            seen = ([(a, b) for who, a, b in rm_stalls if who == "the RM process"] if act.kind == "freeze_rm"
                    else worker_stalls.get(act.target, []))
            # Reported where it was: as long as the freeze, starting when it did (emulated s).
            if not any(b - a >= 0.7 * frozen and abs(a - act.at_wall_s * self.speed) <= 0.3 * frozen + 2
                       for a, b in seen):
                problems.append(f"{act.kind} at {act.at_wall_s:g} wall s for {frozen:g} s not reported: "
                                f"{seen}")
        if any(b - a > 4 for _, a, b in rm_stalls) and not s.get("overloaded"):
            problems.append("a stall longer than the detector's timeout, yet not overloaded")
        return ChaosResult(
            self.acts, self.tasks, completed, finished, rm_exit, rm_stalls, worker_stalls, problems
        )


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m emulator.experiments.chaos", description=__doc__)
    p.add_argument("--out", default="runs/chaos", help="results directory (default runs/chaos)")
    p.add_argument("--nodes", type=int, default=60, help="NodeManagers in all (default 60)")
    p.add_argument("--workers", type=int, default=3, help="node worker processes (default 3, at least 2)")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--speed", type=float, default=10.0, help="emulated s per wall s (default 10)")
    p.add_argument("--duration", type=float, default=200.0, help="emulated s (default 200)")
    args = p.parse_args(argv)
    if args.workers < 2 or args.nodes < args.workers:
        print("error: --workers: at least 2, and no more than --nodes", file=sys.stderr)
        return 2
    result = Chaos(Path(args.out), args.nodes, args.workers, args.seed, args.speed, args.duration).run()
    print(msgspec.json.format(msgspec.json.encode(result)).decode())
    return 1 if result.problems else 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
