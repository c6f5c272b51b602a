"""The workload's clients: they submit the scenario's operations to the RM at their times, and
looping users resubmit when their operation finishes, and an operation that waits for others of
its job (``after``: all their tasks complete; ``after_start``: one of their tasks runs, as a job's
tasks wait for its AM container) is submitted once they allow it (and not before its time).

With a ``SubmissionLog`` the clients remember what they submitted (``workload.jsonl`` in the run
directory), so that a standalone RM process restarted on its run directory resumes the workload
where it stood instead of submitting everything again.

A job's AM container survives an RM restart as YARN's work-preserving restart keeps it: its node
re-registers with it and the RM places it back; its client learns where from that node (the
place it knew, if any, is the old life's) and still ends it once the job's other operations are
done, at once if they completed meanwhile.
"""

from __future__ import annotations

import errno
import random
from collections.abc import Iterable
from pathlib import Path
from typing import IO

import msgspec

from emulator.measure.jobs import JobRecorder
from emulator.scenario.distributions import value_rng
from emulator.scenario.usage import tier_number
from emulator.scenario.workload_schema import OperationConfig, WorkloadConfig
from emulator.time.clock import LoopClock
from rm import (
    JournalCorrupt,
    JournalWriteFailed,
    NodeEvent,
    OperationEvent,
    OperationSpec,
    ResourceManager,
    RMObserver,
    RMUnavailable,
    TaskStarted,
)
from rm.protocol import Resources

# A job's AM (`lasts_for_job`) is submitted for this long; its client ends it once the job's other
# operations completed.
AM_HOLD_S = 1e6


class Submission(msgspec.Struct, frozen=True, array_like=True):
    group: str
    instance: int  # the group's k-th operation
    timed: bool  # a scheduled start (False: a looping user's next operation)


class SubmissionLog:
    """An append-only record of the clients' submissions, one line each, flushed at once."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._file: IO[bytes] | None = None
        self._encoder = msgspec.json.Encoder()

    def read(self) -> list[Submission]:
        if not self.path.exists():
            return []
        decoder = msgspec.json.Decoder(Submission)
        out = []
        bad: int | None = None
        with self.path.open("rb") as f:
            for number, line in enumerate(f, 1):
                if bad is not None:  # only the last line may be torn (the process died writing it)
                    raise JournalCorrupt(f"{self.path}: line {bad}: expected a submission [group, instance, "
                                         "timed]; lines follow it, so it is damage, not a torn write")
                try:
                    out.append(decoder.decode(line))
                except msgspec.DecodeError:
                    bad = number
        return out

    def append(self, sub: Submission) -> None:
        # A write that fails stops the run as the RM's journal does (emulator.harness.guard).
        line = self._encoder.encode(sub) + b"\n"
        try:
            if self._file is None:
                self._file = self.path.open("ab", buffering=0)
            if self._file.write(line) != len(line):
                raise OSError(errno.EIO, "short write")
        except OSError as err:
            raise JournalWriteFailed(self.path, err) from err

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None


class WorkloadDriver(RMObserver):
    def __init__(
        self, config: WorkloadConfig, rm: ResourceManager, clock: LoopClock, seed: int,
        log: SubmissionLog | None = None, jobs: JobRecorder | None = None,
    ) -> None:
        """``jobs``: told each operation's job and ideal completion time before it is submitted."""
        self._config = config
        self._jobs = jobs
        self._rm = rm
        self._clock = clock
        self._seed = seed
        self._log = log
        self._by_group: dict[str, OperationConfig] = {o.name: o for o in config.operations}
        self._instances: dict[str, int] = {}
        self._timed_done: dict[str, int] = {}
        self._stopped = False
        self._held: list[tuple[OperationSpec, Submission]] = []
        # Order within jobs: operations waiting for others, what has started / finished among those
        # waited for, and each ordered operation's ideal (uncontended) start and end.
        self._waiting = {o.name: o for o in config.operations if o.after or o.after_start}
        self._waiters: dict[str, list[OperationConfig]] = {}  # name -> the operations waiting for it
        for o in self._waiting.values():
            for n in {*o.after, *o.after_start}:
                self._waiters.setdefault(n, []).append(o)
        self._watched = set(self._waiters)
        self._started: set[str] = set()
        self._finished: set[str] = set()
        self._ideal: dict[str, tuple[float, float]] = {}
        ordered = self._watched | set(self._waiting)
        self._job_base: dict[str, float] = {}
        for o in config.operations:
            if o.name in ordered:
                label = o.job or o.name
                self._job_base[label] = min(self._job_base.get(label, o.submit_at_s), o.submit_at_s)
        if jobs is not None:
            for o in self._waiting.values():
                jobs.hold(o.job or o.name)
        # AM containers: each job's AM, its other operations not finished yet, where its AM runs.
        self._am = {o.job: o.name for o in config.operations if o.lasts_for_job}
        self._member = {o.name: o.job for o in config.operations if o.job in self._am and not o.lasts_for_job}
        self._open: dict[str, int] = {}
        for job in self._member.values():
            self._open[job] = self._open.get(job, 0) + 1
        self._am_runs_on: dict[str, tuple[int, int]] = {}  # AM -> (machine id, container id)
        self._am_op: dict[str, int] = {}  # AM -> its operation id
        # AMs running where this client does not know (an RM restarted): operation id -> AM.
        self._am_unplaced: dict[int, str] = {}
        rm.observe(self)

    def install_pools(self) -> None:
        rm = self._rm
        declared = {p.name for p in self._config.pools}
        for p in self._config.pools:
            if p.parent != "root" and not rm.has_pool(p.parent) and p.parent not in declared:
                rm.add_pool(p.parent)
        pending = list(self._config.pools)
        while pending:  # parents before children, whatever the file order
            progress = [p for p in pending if rm.has_pool(p.parent)]
            for p in progress:
                rm.add_pool(p.name, p.weight, Resources(p.min_cpu, p.min_ram_gib), p.parent, p.max_cpu,
                            p.max_ram_gib)
            pending = [p for p in pending if p not in progress]
            if not progress:
                raise ValueError(f"pool cycle among {[p.name for p in pending]}")
        for op in self._config.operations:
            if not rm.has_pool(op.pool):
                rm.add_pool(op.pool)

    def start(self) -> None:
        """Schedule every submission not made yet; call once the RM is running (a resumed RM:
        once it has recovered its journal)."""
        now = self._clock.now()
        for op in self._config.operations:
            done = self._timed_done.get(op.name, 0)
            if op.name in self._waiting:
                if done:  # submitted by an earlier RM process
                    del self._waiting[op.name]
                    if self._jobs is not None:
                        self._jobs.hold(op.job or op.name, -1)
                continue
            times = submit_times(op, self._seed)
            for k in range(done, len(times)):
                self._clock.call_later(max(0.0, times[k] - now), self._submit, op, True)
        self._release()  # a resumed workload: what it waited for may be done already

    def resume(self) -> None:
        """Take up the workload of an earlier RM process from the log and the recovered RM: no
        operation is submitted twice, and a looping user whose operation finished goes on."""
        assert self._log is not None
        for sub in self._log.read():
            self._instances[sub.group] = max(self._instances.get(sub.group, 0), sub.instance + 1)
            if sub.timed:
                self._timed_done[sub.group] = self._timed_done.get(sub.group, 0) + 1
        live: dict[str, int] = {}
        for view in self._rm.operations_view():
            cfg = self._by_group.get(view.group)
            if cfg is None:
                continue
            live[view.group] = live.get(view.group, 0) + 1
            # Submitted just before the process died, before its log line: count it.
            k = _instance(view.name, cfg)
            if k >= self._instances.get(view.group, 0):
                self._instances[view.group] = k + 1
                self._timed_done[view.group] = self._timed_done.get(view.group, 0) + int(not cfg.loop)
        states = {v.group: v.state for v in self._rm.operations_view()}
        for name in self._watched:
            if name in states:
                if states[name] != "pending":
                    self._started.add(name)
            elif self._instances.get(name, 0):  # submitted, and no longer live: finished
                self._started.add(name)
                self._finished.add(name)
        for name, job in self._member.items():
            if name not in states and self._instances.get(name, 0):
                self._open[job] -= 1  # finished before the restart
        for view in self._rm.operations_view():
            cfg = self._by_group.get(view.group)
            if cfg is not None and cfg.lasts_for_job and view.running:
                self._am_unplaced[view.id] = cfg.name  # its node will report it
        for cfg in self._config.operations:
            if cfg.loop:
                # Each looping user has one live operation; one whose operation finished while
                # no RM ran is due its next one now.
                for _ in range(self._timed_done.get(cfg.name, 0) - live.get(cfg.name, 0)):
                    self._clock.call_soon(self._submit, cfg, False)

    def stop(self) -> None:
        self._stopped = True
        if self._log is not None:
            self._log.close()

    def _submit(self, cfg: OperationConfig, timed: bool) -> None:
        if self._stopped:
            return
        k = self._instances.get(cfg.name, 0)
        self._instances[cfg.name] = k + 1
        durations, cpu, ram = instance(cfg, self._seed, k, self._config.min_task_seconds)
        name = cfg.name if (cfg.instance_count == 1 and not cfg.loop) else f"{cfg.name}#{k}"
        if self._jobs is not None:
            job = cfg.job or cfg.name
            self._jobs.expect(name, job if name == cfg.name else f"{job}#{k}", self._ideal_s(cfg, durations),
                              cfg.lasts_for_job)
            if cfg.after or cfg.after_start:
                self._jobs.hold(job, -1)
        if cfg.lasts_for_job:
            durations = [max(AM_HOLD_S, *durations)]
        self._send(
            OperationSpec(
                name=name,
                pool=cfg.pool,
                demand=Resources(cpu, ram),
                durations=durations,
                weight=cfg.weight,
                group=cfg.name,
                tier=tier_number(cfg.tier),
                usage=None if cfg.usage is None else cfg.usage.task_usage(
                    random.Random(f"{self._seed}:{cfg.name}:{k}:usage").getrandbits(31), cfg.tier
                ),
            ),
            Submission(cfg.name, k, timed),
        )
        if timed:
            self._timed_done[cfg.name] = self._timed_done.get(cfg.name, 0) + 1

    def _send(self, spec: OperationSpec, sub: Submission) -> None:
        try:
            self._rm.submit_operation(spec)
        except RMUnavailable:
            # The RM is restarting: the client holds the submission until it is back.
            self._held.append((spec, sub))
            return
        if self._log is not None:
            self._log.append(sub)  # once accepted: the RM has journaled it

    def rm_recovered(self) -> None:
        # The RM's new life knows the AMs' containers again once their nodes re-register (under
        # machine ids of its own): the places known are the old life's.
        for name in list(self._am_runs_on):
            self._am_unplaced[self._am_op[name]] = name
        self._am_runs_on.clear()
        held, self._held = self._held, []
        for spec, sub in held:
            self._send(spec, sub)

    def node_registered(self, ev: NodeEvent) -> None:
        if self._am_unplaced:  # once the RM has placed the node's containers back
            self._clock.call_soon(self._place_ams, ev.machine_id)

    def _place_ams(self, machine_id: int) -> None:
        """Learn which unplaced AMs run on a node that re-registered; end those whose job is done."""
        view = self._rm.node_view(machine_id)
        if view is None or self._stopped:
            return
        for c in view.containers:
            name = self._am_unplaced.pop(c.op_id, None)
            if name is None:
                continue
            self._am_runs_on[name] = (machine_id, c.container_id)
            self._am_op[name] = c.op_id
            if self._open.get(self._by_group[name].job, 0) <= 0:
                self._end_am(name)

    def operation_finished(self, ev: OperationEvent) -> None:
        cfg = self._by_group.get(ev.group)
        if cfg is not None and cfg.loop and not self._stopped:
            self._submit(cfg, False)
        if ev.group in self._watched:
            self._started.add(ev.group)  # an operation of no tasks finishes without starting one
            self._finished.add(ev.group)
            self._release(self._waiters.get(ev.group, []))
        self._am_unplaced.pop(ev.op_id, None)  # an AM that ended: nothing to look for
        job = self._member.get(ev.group)
        if job is not None:
            self._open[job] -= 1
            if self._open[job] == 0:
                self._clock.call_soon(self._end_am, self._am[job])

    def task_started(self, ev: TaskStarted) -> None:
        if ev.group in self._watched and ev.group not in self._started:
            self._started.add(ev.group)
            self._release(self._waiters.get(ev.group, []))
        cfg = self._by_group.get(ev.group)
        if cfg is not None and cfg.lasts_for_job:
            self._am_runs_on[cfg.name] = (ev.machine_id, ev.container_id)
            self._am_op[cfg.name] = ev.op_id
            self._am_unplaced.pop(ev.op_id, None)
            if self._open.get(cfg.job, 0) <= 0:  # its job is done already (or has nothing else)
                self._clock.call_soon(self._end_am, cfg.name)

    def _end_am(self, name: str) -> None:
        """The job is done: its AM container ends (not from inside the RM's call that said so). A
        stale place (the AM was moved since, or ended) is refused by the RM, harmlessly; an AM not
        placed again yet after a restart is ended once its node reports it (``_place_ams``)."""
        where = self._am_runs_on.get(name)
        if where is not None and not self._stopped:
            self._rm.end_container(*where)

    def _release(self, candidates: Iterable[OperationConfig] | None = None) -> None:
        """Schedule each waiting operation (of ``candidates``, else all) whose wait is over, at its
        time at the earliest: never from inside the RM's call that told of the event."""
        if not self._waiting:
            return
        now = self._clock.now()
        for cfg in list(self._waiting.values()) if candidates is None else candidates:
            if cfg.name not in self._waiting:
                continue
            if all(a in self._finished for a in cfg.after) and all(
                    a in self._started for a in cfg.after_start):
                del self._waiting[cfg.name]
                self._clock.call_later(max(0.0, cfg.submit_at_s - now), self._submit, cfg, True)

    def _ideal_s(self, cfg: OperationConfig, durations: list[float]) -> float:
        """The operation's ideal completion time within its job: its longest task, or for an
        ordered operation its uncontended end (after what it waits for) from its job's submit."""
        longest = max(durations, default=0.0)
        base = self._job_base.get(cfg.job or cfg.name)
        if base is None:
            return longest
        start = cfg.submit_at_s
        for dep in cfg.after:
            start = max(start, self._ideal.get(dep, (0.0, 0.0))[1])
        for dep in cfg.after_start:
            start = max(start, self._ideal.get(dep, (0.0, 0.0))[0])
        self._ideal[cfg.name] = (start, start + longest)
        return start + longest - base


def submit_times(op: OperationConfig, seed: int) -> list[float]:
    """When each timed copy of ``op`` is submitted (emulated s)."""
    if op.arrivals is not None:
        return op.arrivals.times(op.submit_at_s, value_rng(seed, op.name, "arrivals"))
    return [op.submit_at_s + k * op.repeat_every_s for k in range(op.repeat)]


def instance(cfg: OperationConfig, seed: int, k: int, min_task_s: float) -> tuple[list[float], float, float]:
    """The ``k``-th submitted instance of ``cfg``: its task durations and its task size (cpu, RAM),
    drawn from the scenario's seed (the same for every run of it)."""
    rng = value_rng(seed, cfg.name, k)
    durations = task_durations(cfg, rng, min_task_s)
    cpu = cfg.cpu if isinstance(cfg.cpu, float | int) else cfg.cpu.draw(rng)
    ram = cfg.ram_gib if isinstance(cfg.ram_gib, float | int) else cfg.ram_gib.draw(rng)
    return durations, cpu, ram


def task_durations(cfg: OperationConfig, rng: random.Random, low: float) -> list[float]:
    """One operation's task durations: recorded, drawn from a distribution, or Normal (the
    original model, its draws unchanged), never below ``low``."""
    if cfg.durations_s is not None:
        return list(cfg.durations_s)
    if cfg.seconds is not None:
        dist = cfg.seconds
        return [dist.draw(rng, low) for _ in range(cfg.task_count)]
    mean = cfg.seconds_mean
    assert mean is not None  # one of the three, checked in OperationConfig
    if cfg.seconds_deviation > 0:
        return [max(low, rng.gauss(mean, cfg.seconds_deviation)) for _ in range(cfg.task_count)]
    return [mean] * cfg.task_count


def _instance(name: str, cfg: OperationConfig) -> int:
    """k of the operation named ``name`` of group ``cfg`` (``group#k``, or the group's one)."""
    _, sep, k = name.rpartition("#")
    return int(k) if sep and k.isdigit() else 0
