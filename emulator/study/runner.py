"""Running a study: its points in parallel processes, each point's metrics written to the one
output JSON as soon as it is done, so that an interrupted study resumes where it stopped (a point
already in the output with the same exact scenario and the metrics asked for is not run again)."""

from __future__ import annotations

import fcntl
import os
import time
from collections.abc import Callable, Iterator
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import msgspec

from emulator.harness.outcome import RunOutcome
from emulator.harness.runner import invariants_wanted, run_blocking
from emulator.results.recording import recorded
from emulator.results.registry import lookup
from emulator.results.summary import full_summary, write_results
from emulator.scenario.schema import Scenario
from emulator.study.hosting import check_spec, dask_hosts
from emulator.study.modelpoints import ModelResolver
from emulator.study.models import MODELS, run_model
from emulator.study.output import FORMAT, PointResult, StudyOutput, read_output, write_output
from emulator.study.points import Point, Resolver, expand
from emulator.study.sections import collect
from emulator.study.spec import AXIS_NAMES, NODES, Study, StudyError, load_study, study_from_data
from emulator.study.sweep import failed, row
from emulator.study.tables import check_renders

if TYPE_CHECKING:
    from emulator.harness.dask_hosts import ClusterOptions


class PointStopped(KeyboardInterrupt):
    """A point's run ended early (Ctrl-C or SIGTERM reached its process): its figures cover part of
    the run only and are not kept; the study stops as if interrupted."""


def default_jobs() -> int:
    return max(1, (os.cpu_count() or 1) - 1)


Measured = tuple[dict[str, Any], dict[str, Any], float]  # metrics, collected sections, wall s


def run_point(scenario: Scenario, metrics: list[str], run_dir: str | None, source: str,
              overrides: dict[str, Any], sections: list[str] | None = None,
              cluster: ClusterOptions | None = None) -> Measured:
    """One point, in whichever process: its metrics, its ``sections`` and wall seconds.
    ``run_dir``: also its full results there (summary.json, timeseries.csv, scenario.toml, run.json:
    `emulator rerun` and `emulator compare` take it); ``cluster``: its node hosts on Dask."""
    t0 = time.monotonic()
    if run_dir is None:
        outcome = _complete(run_blocking(scenario, None, cluster=cluster))
        summary = full_summary(outcome)
    else:
        out = Path(run_dir)
        out.mkdir(parents=True, exist_ok=True)
        # Decided once, so the record says what the run did (HBEMU_CHECK_INVARIANTS) and a rerun repeats it.
        check = invariants_wanted(None)
        with recorded(out, "run", source, scenario, overrides, [], check_invariants=check) as rec:
            outcome = _complete(run_blocking(scenario, out / "events.jsonl", check_invariants=check,
                                             cluster=cluster))
            summary = write_results(outcome, out)
            rec.finish(0)
    return ({name: lookup(summary, name) for name in metrics}, collect(outcome, summary, sections or []),
            round(time.monotonic() - t0, 3))


def run_model_point(model: str, params: dict[str, Any]) -> Measured:
    """One point of a model study, in whichever process: (no metrics, the model's result, wall s)."""
    t0 = time.monotonic()
    output = run_model(model, params)
    return {}, output, round(time.monotonic() - t0, 3)


def _complete(outcome: RunOutcome) -> RunOutcome:
    if outcome.partial:
        raise PointStopped
    return outcome


@contextmanager
def only_writer(out: Path) -> Iterator[None]:
    """One study process writes an output at a time (a second would drop the first's points). The
    lock file goes when the study ends, so none is left beside a committed output."""
    out.parent.mkdir(parents=True, exist_ok=True)
    path = out.with_name(out.name + ".lock")
    with path.open("a", encoding="ascii") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise StudyError(f"{out}: another `emulator study` is writing it; give this one another "
                             "--out") from None
        try:
            yield
        finally:
            path.unlink(missing_ok=True)


def _same(a: dict[str, Any], b: dict[str, Any]) -> bool:
    # Compared as JSON holds them (tuples read back as lists).
    return bool(msgspec.json.decode(msgspec.json.encode(a)) == msgspec.json.decode(msgspec.json.encode(b)))


def with_axes(study: Study, axes: dict[str, list[Any]], source: Path) -> Study:
    """``study`` with the values of some of its axes replaced (`--axis NAME=V1,V2`), checked again."""
    if not axes:
        return study
    for name in axes:
        if name not in study.axes:
            raise StudyError(f"--axis {name}: not an axis of {source} (its axes: "
                             f"{', '.join(study.axes) or 'none'}; {AXIS_NAMES})")
    data = msgspec.to_builtins(study)
    data["axes"] = {**data["axes"], **axes}
    return study_from_data(data, f"{source} with --axis")


class StudyRun:
    """One `emulator study FILE`: its points resolved (every bad override refused before any runs),
    those already in ``out`` kept, the rest run ``jobs`` at a time."""

    def __init__(self, study_file: Path, out: Path, *, jobs: int = 1, runs_dir: Path | None = None,
                 force: bool = False, say: Callable[[str], None] = print,
                 sets: dict[str, Any] | None = None, axes: dict[str, list[Any]] | None = None,
                 cluster: str | None = None) -> None:
        """``sets``, ``axes``, ``cluster``: `emulator study --set/--axis/--cluster`, recorded in the
        output (a resumed study refuses an output run with other ``sets`` or ``cluster``)."""
        self.study_file, self.out, self.jobs, self.runs_dir, self.say = study_file, out, jobs, runs_dir, say
        self.study: Study = with_axes(load_study(study_file), axes or {}, study_file)
        check_renders(self.study, str(study_file))
        self.cluster = cluster
        given = (("set", sets), ("axes", axes), ("cluster", cluster))
        self.overrides: dict[str, Any] = {k: v for k, v in given if v}
        self.resolver = Resolver(self.study, study_file, sets)
        self.points: list[Point] = expand(self.study)
        self.scenarios: dict[str, Scenario] = {}
        self.skipped: list[str] = []
        # What each point runs, as the output keeps it: its scenario, or a model's parameters.
        if self.study.model:
            if runs_dir is not None or cluster is not None:
                raise StudyError(f"{study_file}: a model study's points are not emulator runs: no "
                                 f"{'--runs' if runs_dir is not None else '--cluster'}")
            models = ModelResolver(self.study, study_file, sets)
            self.data = {p.key: models.params(p) for p in self.points}
        else:
            self.scenarios = {p.key: self.resolver.scenario(p) for p in self.points}
            self.data = {p.key: self.resolver.scenario_data(p, self.scenarios[p.key]) for p in self.points}
            if cluster is not None:
                check_spec(cluster)
                bad = next((k for k, sc in self.scenarios.items() if sc.transport.kind != "tcp"), None)
                if bad is not None:
                    raise StudyError(f"{study_file}: point `{bad}`: --cluster hosts a TCP run's nodes: needs "
                                     f'transport.kind = "tcp" (or --set transport.kind=tcp)')
        self.done: dict[str, PointResult] = {} if force else self._resumable()

    def _resumable(self) -> dict[str, PointResult]:
        if not self.out.exists():
            return {}
        old = read_output(self.out)
        if old.format != FORMAT:
            raise StudyError(f"{self.out}: written as {old.format!r}, not {FORMAT!r}: give another --out "
                             "or --force to run the study again")
        for what in ("set", "cluster"):
            if old.points and old.overrides.get(what) != self.overrides.get(what):
                then, now = old.overrides.get(what) or "(none)", self.overrides.get(what) or "(none)"
                raise StudyError(f"{self.out}: its points ran with --{what} {then}, this study with --{what} "
                                 f"{now}: give another --out (or --force to run them all again)")
        kept = {}
        for r in old.points:
            if (r.key in self.data and _same(r.params if self.study.model else r.scenario, self.data[r.key])
                    and all(m in r.metrics for m in self.study.metrics)
                    and all(c in r.collected for c in self.study.collect)):
                kept[r.key] = msgspec.structs.replace(
                    r, metrics={m: r.metrics[m] for m in self.study.metrics},
                    collected={c: r.collected[c] for c in self.study.collect})
        if old.points and len(kept) < len(old.points):
            self.say(f"{self.out}: {len(old.points) - len(kept)} of its points are not this study's as it "
                     "is now (another scenario, or metrics or sections missing): they are run again or "
                     "dropped")
        return kept

    @property
    def todo(self) -> list[Point]:
        return [p for p in self.points if p.key not in self.done]

    def output(self) -> StudyOutput:
        return StudyOutput(format=FORMAT, file=str(self.study_file), study=msgspec.to_builtins(self.study),
                           points=[self.done[p.key] for p in self.points if p.key in self.done],
                           overrides=self.overrides, skipped=self.skipped)

    def job(self, p: Point) -> tuple[Callable[..., Measured], tuple[Any, ...]]:
        """What runs point ``p``, and its arguments (plain data, for another process)."""
        if self.study.model:
            return run_model_point, (self.study.model, self.data[p.key])
        return run_point, self.point_args(p)

    def point_args(self, p: Point) -> tuple[Scenario, list[str], str | None, str, dict[str, Any],
                                            list[str]]:
        run_dir = str(self.runs_dir / p.key.replace("|", "-")) if self.runs_dir else None
        return (self.scenarios[p.key], list(self.study.metrics), run_dir, str(self.resolver.path(p)),
                self.resolver.overrides(p), list(self.study.collect))

    def _finish(self, p: Point, metrics: dict[str, Any], collected: dict[str, Any], wall_s: float) -> None:
        if self.study.model:  # `collected` is the model's result
            result = PointResult(key=p.key, variant=p.variant, coords=p.coords, params=self.data[p.key],
                                 output=collected, wall_s=wall_s)
        else:
            result = PointResult(key=p.key, variant=p.variant, coords=p.coords, metrics=metrics,
                                 collected=collected, scenario=self.data[p.key], wall_s=wall_s)
        self.done[p.key] = result
        write_output(self.out, self.output())
        self.say(f"[{len(self.done)}/{len(self.points)}] {p.key} ({wall_s:.1f} s)")

    def run(self) -> StudyOutput:
        with only_writer(self.out):
            return self._run()

    def _run(self) -> StudyOutput:
        todo = self.todo
        if len(self.done):
            self.say(f"{self.out}: {len(self.done)} of {len(self.points)} points already done; "
                     f"{len(todo)} to run")
        realtime = [p for p in todo
                    if p.key in self.scenarios and self.scenarios[p.key].run.clock == "realtime"]
        timed = todo if self.study.model and MODELS[self.study.model].timed else []
        rest = [p for p in todo if p not in realtime and p not in timed]
        if realtime and self.jobs > 1 and len(todo) > 1:
            self.say(f"{len(realtime)} real-time points run one at a time, whatever --jobs says: a real-time "
                     "run measures CPU and lateness, and two at once would falsify each other")
        if timed and self.jobs > 1 and len(todo) > 1:
            self.say(f"model `{self.study.model}` times the CPU: its {len(timed)} points run one at a time "
                     "in this process, whatever --jobs says")
        if self.jobs <= 1 or len(rest) <= 1:
            self._run_here(rest)
        else:
            self._run_parallel(rest)
        self._run_here(timed, announce=True)
        if realtime:
            first = self.scenarios[realtime[0].key]
            slices = first.transport.worker_processes() if first.transport.kind == "tcp" else 0
            with dask_hosts(self.cluster, slices) as hosts:
                self._run_here(realtime, hosts)
        write_output(self.out, self.output())
        return self.output()

    def _run_here(self, points: list[Point], hosts: ClusterOptions | None = None,
                  announce: bool = False) -> None:
        """One after another, in this process (no start-up cost; a real-time or timed point alone);
        ``announce``: a line as each starts (a timed point may take minutes)."""
        for p in points:
            if self._stopped(p):
                continue
            if announce:
                self.say(f"[{len(self.done) + 1}/{len(self.points)}] {p.key}: started")
            fn, args = self.job(p)
            with self._failing(p):
                result = fn(*args, hosts) if hosts is not None else fn(*args)
            self._finish(p, *result)

    def _stopped(self, p: Point) -> bool:
        """`[limits] stop_after_failure`: a point is not run once a smaller node count of its mode
        (the same variant and other coordinates) has failed."""
        limits = self.study.limits
        if limits is None or not limits.stop_after_failure or NODES not in p.coords:
            return False
        for q in self.done.values():
            if (q.variant == p.variant and q.coords[NODES] < p.coords[NODES]
                    and all(q.coords.get(a) == v for a, v in p.coords.items() if a != NODES)
                    and failed(row(q), limits.threshold)):
                self.skipped.append(p.key)
                self.say(f"skipped {p.key}: {q.key} failed (h1 or h2 < {limits.threshold:g}, or overloaded)")
                return True
        return False

    @contextmanager
    def _failing(self, p: Point) -> Iterator[None]:
        """A point that fails (an invariant broken, a bug) is named; the error itself goes on up."""
        try:
            yield
        except Exception as err:
            self.say(f"point `{p.key}` failed ({type(err).__name__}); the {len(self.done)} points done "
                     f"are in {self.out}")
            raise

    def _run_parallel(self, todo: list[Point]) -> None:
        with ProcessPoolExecutor(max_workers=min(self.jobs, len(todo))) as pool:
            running: dict[Future[Measured], Point] = {}
            waiting = list(todo)
            try:
                while waiting or running:
                    # Started only as a process frees up, so that the stop rule sees what ended.
                    while waiting and len(running) < self.jobs:
                        p = waiting.pop(0)
                        if not self._stopped(p):
                            fn, args = self.job(p)
                            running[pool.submit(fn, *args)] = p
                    if not running:
                        break
                    finished, _ = wait(running, return_when=FIRST_COMPLETED)
                    for fut in finished:
                        p = running.pop(fut)
                        with self._failing(p):
                            result = fut.result()
                        self._finish(p, *result)
            except BaseException:
                # Interrupted (or a point failed): the points done are in the output already. The
                # points running end early (SIGTERM: their runs stop as on Ctrl-C) and are dropped.
                workers = list((getattr(pool, "_processes", None) or {}).values())
                pool.shutdown(wait=False, cancel_futures=True)
                for process in workers:
                    if process.is_alive():
                        process.terminate()
                raise
