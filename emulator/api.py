"""The Python API: run a scenario from a script or a notebook and get its results as objects.

    import emulator
    result = emulator.run("scenarios/quickstart.toml", seed=3, heartbeat__mode="delta")
    result.summary["h1"], result.timeseries.column("cpu_utilization")

``run`` does what ``emulator run`` does (the same code: emulator.cli.execute) and returns a
``Result``. A run needs an event loop of its own (a virtual-time loop, whose clock jumps over idle
time); when the calling thread already runs one (Jupyter, an ``async def``), ``run`` runs the
emulation on a worker thread with its own loop and waits for it, so it works the same there.
``await run_async(...)`` does not block the caller's loop while it waits; cancelling it stops the
run (its results, partial, are written first).
"""

from __future__ import annotations

import asyncio
import contextlib
import csv
import html
import shutil
import tempfile
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import msgspec

if TYPE_CHECKING:
    from emulator.harness.guard import StopRequest
    from emulator.harness.runner import Tick
    from emulator.scenario.schema import Scenario

__all__ = ["Result", "Table", "load", "run", "run_async"]


@dataclass(frozen=True)
class Table:
    """A small column table (pandas is not needed): ``columns`` and ``rows`` of values; numbers are
    ``int`` or ``float``, an empty cell is None."""

    columns: tuple[str, ...] = ()
    rows: list[tuple[Any, ...]] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.rows)

    def __iter__(self) -> Iterator[dict[str, Any]]:
        return (dict(zip(self.columns, row, strict=True)) for row in self.rows)

    def column(self, name: str) -> list[Any]:
        try:
            i = self.columns.index(name)
        except ValueError:
            raise KeyError(f"no column {name!r}; columns: {', '.join(self.columns)}") from None
        return [row[i] for row in self.rows]

    def to_dataframe(self) -> Any:
        """A pandas DataFrame: ``emulator.run(...).jobs.to_dataframe()`` (pandas is imported only
        here; it is the optional extra ``pandas``, not a dependency). An empty cell is NaN."""
        try:
            import pandas  # type: ignore[import-untyped,import-not-found,unused-ignore]
        except ImportError:
            raise ImportError("Table.to_dataframe needs pandas: pip install 'hbemu[pandas]' (or pandas); "
                              "without it use .columns and .rows, or .column(name)") from None
        return pandas.DataFrame(self.rows, columns=list(self.columns))

    def _repr_html_(self) -> str:
        """How a notebook shows the table: as its DataFrame when pandas is installed (so
        ``emulator.run(...).jobs`` in a cell shows a DataFrame), else as a plain HTML table."""
        try:
            return str(self.to_dataframe()._repr_html_())
        except ImportError:
            head = "".join(f"<th>{html.escape(c)}</th>" for c in self.columns)
            cells = ("".join(f"<td>{'' if v is None else html.escape(str(v))}</td>" for v in row)
                     for row in self.rows)
            body = "".join(f"<tr>{c}</tr>" for c in cells)
            return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"

    @classmethod
    def read_csv(cls, path: Path) -> Table:
        with path.open(newline="", encoding="utf-8") as f:
            reader = csv.reader(f)
            header = next(reader, None)
            if header is None:
                return cls()
            return cls(tuple(header), [tuple(_cell(v) for v in row) for row in reader])


def _cell(text: str) -> Any:
    if text == "":
        return None
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            continue
    return text


@dataclass(frozen=True)
class Result:
    """A finished run: its figures as objects, and the directory that holds them as files."""

    run_dir: Path
    summary: dict[str, Any]  # summary.json
    timeseries: Table  # timeseries.csv: one row per sample of emulated time
    jobs: Table  # jobs.csv when the run has one (per-job figures), else an empty table
    exit_status: int = 0  # as `emulator run` would exit: 4 overloaded, 5 journal write failed, 130 stopped
    timing: dict[str, Any] = field(default_factory=dict)  # timing.json: wall-clock figures of this run

    @property
    def partial(self) -> bool:
        """Stopped before the scenario's end (the figures cover what ran)."""
        return bool(self.summary.get("partial"))


def load(run_dir: str | Path, exit_status: int = 0) -> Result:
    """The ``Result`` of a results directory written earlier (by ``run`` or ``emulator run``)."""
    d = Path(run_dir)
    from emulator.scenario.loader import ScenarioError

    try:
        summary = msgspec.json.decode((d / "summary.json").read_bytes(), type=dict[str, Any])
        timeseries = Table.read_csv(d / "timeseries.csv")
    except FileNotFoundError as err:
        raise ScenarioError(f"{d}: no {Path(str(err.filename)).name}: not a results directory") from None
    except (OSError, msgspec.DecodeError, UnicodeDecodeError) as err:
        raise ScenarioError(f"{d}: cannot be read: {err}") from None
    jobs_csv = d / "jobs.csv"
    jobs = Table.read_csv(jobs_csv) if jobs_csv.is_file() else Table()
    tj = d / "timing.json"
    timing = msgspec.json.decode(tj.read_bytes(), type=dict[str, Any]) if tj.is_file() else {}
    return Result(d, summary, timeseries, jobs, exit_status, timing)


def _overrides(seed: int | None, duration_s: float | None, overrides: Mapping[str, Any] | None,
               fields: dict[str, Any]) -> dict[str, Any]:
    """Dotted field paths, as ``--set`` takes them: ``heartbeat__mode="delta"`` is
    ``heartbeat.mode``; ``overrides={"workload.operations[0].tasks": 10}`` reaches any path."""
    out = {key.replace("__", "."): value for key, value in fields.items()}
    out.update(overrides or {})
    if seed is not None:
        out["run.seed"] = seed
    if duration_s is not None:
        out["run.duration_s"] = duration_s
    return out


def _prepare(scenario: str | Path | Scenario, out: str | Path | None, given: dict[str, Any],
             check_invariants: bool | None, report: bool,
             progress: Callable[[Tick], None] | None, stop: StopRequest | None = None,
             ) -> tuple[Callable[[], Result], Path]:
    """Load and check everything on the caller's thread (a bad scenario raises here, at once);
    return the run itself, for whichever thread runs it, and its results directory. ``stop``:
    ends the run early from another thread."""
    from emulator.cli.execute import execute, run_directory
    from emulator.results.console import EXIT_FAILED, EXIT_OVERLOADED, EXIT_STOPPED
    from emulator.results.recording import fit_warmup
    from emulator.results.rundir import fresh_directory
    from emulator.scenario.loader import ScenarioError, load_scenario, with_overrides
    from emulator.scenario.schema import Scenario

    adjusted: list[str] = []
    if isinstance(scenario, Scenario):
        source = "<Scenario object>"
        sc = with_overrides(scenario, given, source)
    elif isinstance(scenario, str | Path):
        source = str(scenario)
        overrides, adjusted = fit_warmup(source, given)
        sc = load_scenario(source, overrides)
    else:
        raise ScenarioError(f"emulator.run: expected a scenario file path or a Scenario, "
                            f"got {type(scenario).__name__}")
    temporary = out is None
    # Never over an earlier run: `out` holding one, the run goes to OUT-2, ... (result.run_dir says).
    directory = fresh_directory(Path(out)) if out is not None else Path(tempfile.mkdtemp(prefix="hbemu-run-"))

    def job() -> Result:
        try:
            with run_directory(directory, source, sc, given, adjusted, check_invariants) as rec:
                outcome, _ = execute(sc, directory, progress, check_invariants, report, stop=stop)
                lag = outcome.lag
                status = EXIT_STOPPED if outcome.partial else (
                    EXIT_OVERLOADED if lag is not None and lag.overloaded else 0)
                if outcome.failure is not None:
                    status = EXIT_FAILED
                rec.finish(status)
            return load(directory, status)
        except BaseException:
            if temporary:  # a failed run's directory of our own: nobody gets a Result naming it
                shutil.rmtree(directory, ignore_errors=True)
            raise

    return job, directory


def _loop_running() -> bool:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


def run(
    scenario: str | Path | Scenario,
    *,
    out: str | Path | None = None,
    seed: int | None = None,
    duration_s: float | None = None,
    overrides: Mapping[str, Any] | None = None,
    check_invariants: bool | None = None,
    report: bool = False,
    progress: Callable[[Tick], None] | None = None,
    **fields: Any,
) -> Result:
    """Run a scenario (a TOML file, or a ``Scenario``) to the end and return its ``Result``.

    ``out``: the results directory (default: a new temporary directory, never the current one);
    ``seed``, ``duration_s`` and ``**fields`` (``heartbeat__mode="delta"``) or ``overrides``
    (``{"scheduler.policy": "fifo"}``) override scenario fields like ``emulator run --set``;
    ``report``: also write report.html and its PNGs. Bad input raises ``ScenarioError`` (its
    message names the file, the field and what was expected); an invariant broken under
    ``check_invariants`` raises ``InvariantViolation``.
    """
    from emulator.harness.guard import StopRequest

    stop = StopRequest()
    job, _ = _prepare(scenario, out, _overrides(seed, duration_s, overrides, fields), check_invariants,
                      report, progress, stop)
    if not _loop_running():
        return job()
    # This thread runs an event loop (a notebook): the run gets its own loop on a worker thread.
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="hbemu-run") as pool:
        future = pool.submit(job)
        try:
            return future.result()
        except KeyboardInterrupt:  # the worker thread has no signal handlers: stop it from here
            stop.request()
            future.exception()  # its partial results are written before this returns
            raise


async def run_async(
    scenario: str | Path | Scenario,
    *,
    out: str | Path | None = None,
    seed: int | None = None,
    duration_s: float | None = None,
    overrides: Mapping[str, Any] | None = None,
    check_invariants: bool | None = None,
    report: bool = False,
    progress: Callable[[Tick], None] | None = None,
    **fields: Any,
) -> Result:
    """``run`` on a worker thread, awaited: the caller's loop goes on meanwhile. ``progress`` is
    called on that worker thread. Cancelling the await stops the run as Ctrl-C would: its results
    directory gets partial results (``summary.json``: ``"partial": true``) before the
    ``CancelledError`` is raised; its message names the directory."""
    from emulator.harness.guard import StopRequest

    stop = StopRequest()
    job, directory = _prepare(scenario, out, _overrides(seed, duration_s, overrides, fields),
                              check_invariants, report, progress, stop)
    task = asyncio.ensure_future(asyncio.to_thread(job))
    try:
        return await asyncio.shield(task)
    except asyncio.CancelledError:
        if task.done():
            raise
        stop.request()
        # The thread writes what ran; wait for it (a second cancel does not abandon it).
        while not task.done():
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.wait([task])
        failed = task.exception()  # retrieved either way: the caller asked to cancel, not for it
        if failed is not None:
            raise asyncio.CancelledError(f"run stopped; it failed meanwhile: {failed!r}") from failed
        raise asyncio.CancelledError(f"run stopped; partial results in {directory}") from None
