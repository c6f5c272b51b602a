"""One run of a scenario into a results directory, as `emulator run` and the Python API
(``emulator.run``) both do it: the directory claimed, ``run.json`` + ``scenario.toml`` written
around the run (so ``emulator rerun DIR`` can repeat it), then summary.json, timeseries.csv and
events.jsonl (and, when asked, report.html with its plots)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from emulator.harness.dask_hosts import ClusterOptions
from emulator.harness.guard import StopRequest
from emulator.harness.outcome import RunOutcome
from emulator.harness.runner import ProgressHook, invariants_wanted, run_blocking
from emulator.results.recording import Recorder, recorded
from emulator.results.rundir import claim, clear_run
from emulator.results.summary import write_results
from emulator.scenario.schema import Scenario


@contextmanager
def run_directory(out: Path, source: str, scenario: Scenario, given: dict[str, Any], adjusted: list[str],
                  check: bool | None, served: bool = False, force: bool = False) -> Iterator[Recorder]:
    """``out`` claimed by this process and its run record written; ``Recorder.finish`` ends it.
    ``force``: an earlier run in ``out`` is removed first (else its files would mix with this one's)."""
    with claim(out):
        if force:
            clear_run(out)
        with recorded(out, "run", source, scenario, given, adjusted,
                      check_invariants=invariants_wanted(check), served=served) as rec:
            yield rec


def execute(scenario: Scenario, out: Path, progress: ProgressHook | None = None, check: bool | None = None,
            report: bool = True, cluster: ClusterOptions | None = None,
            stop: StopRequest | None = None,
            emulated: Callable[[RunOutcome], None] | None = None) -> tuple[RunOutcome, dict[str, Any]]:
    """Run on this thread's own fresh loop and write the results (and the report) into ``out``;
    ``cluster``: the node hosts on a Dask cluster; ``stop``: another thread's way to end the run
    early (its results are then partial); ``emulated``: told when the run is over, before the
    results are written (a progress bar's last phase)."""
    outcome = run_blocking(scenario, out / "events.jsonl", progress, check_invariants=check, cluster=cluster,
                           stop=stop)
    if emulated is not None:
        emulated(outcome)
    summary = write_results(outcome, out)
    if report:
        from emulator.results.report import write_run_report

        write_run_report(out)
    return outcome, summary
