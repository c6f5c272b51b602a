"""Run records: write ``run.json`` + ``scenario.toml`` around a run (the command line, the API and
the experiments' runs alike), fit the warm-up to a shortened ``--duration``, and check a rerun
against its original."""

from __future__ import annotations

import sys
import time
import tomllib
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Literal

import msgspec

from emulator.harness.invariants import InvariantViolation
from emulator.results.console import EXIT_STOPPED
from emulator.results.record import (
    RECORD_FILE,
    WALL_CLOCK_FIELDS,
    RunRecord,
    emulator_version,
    now_iso,
    redacted,
    save,
    scenario_data,
    source_commit,
    this_machine,
    write_record,
)
from emulator.scenario.loader import ScenarioError
from emulator.scenario.schema import Scenario


def fit_warmup(path: str | Path, overrides: dict[str, Any],
               hint: str = "; --set run.warmup_s=S to choose it") -> tuple[dict[str, Any], list[str]]:
    """Fit the scenario file to a shortened ``--duration``: its warm-up (below) and its faults
    (those at or after the new end are dropped, each said, instead of refused as a mistake)."""
    overrides, faults_notes = _fit_faults(path, overrides)
    overrides, warmup_notes = _fit_warmup(path, overrides, hint)
    return overrides, faults_notes + warmup_notes


def _fit_faults(path: str | Path, overrides: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    duration = overrides.get("run.duration_s")
    if not isinstance(duration, int | float) or isinstance(duration, bool) or "faults" in overrides:
        return overrides, []
    try:
        faults = tomllib.loads(Path(path).read_text(encoding="utf-8")).get("faults", [])
        late = [i for i, f in enumerate(faults) if float(f["at_s"]) >= duration]
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError, KeyError, TypeError, ValueError,
            AttributeError):
        return overrides, []  # the loader reports what is wrong with the file
    if not late:
        return overrides, []
    dropped = ", ".join(f"faults[{i}] ({faults[i].get('kind')} at {faults[i]['at_s']:g} s)" for i in late)
    note = f"{dropped} dropped: at or after the end of the run shortened by --duration {duration:g}"
    print(f"note: {path}: {note}", file=sys.stderr)
    return {**overrides, "faults": [f for i, f in enumerate(faults) if i not in late]}, [note]


def _fit_warmup(path: str | Path, overrides: dict[str, Any], hint: str) -> tuple[dict[str, Any], list[str]]:
    """A run shortened below the scenario file's warm-up gets the warm-up scaled by the same factor
    (said on stderr) instead of an error; a warm-up set on the command line is the user's and is
    kept, with an error naming both if it does not fit."""
    if "run.duration_s" not in overrides:
        return overrides, []
    try:
        run = tomllib.loads(Path(path).read_text(encoding="utf-8")).get("run", {})
        warmup, full = float(run.get("warmup_s", 0.0)), float(run["duration_s"])
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError, KeyError, TypeError, ValueError,
            AttributeError):
        return overrides, []  # the loader reports what is wrong with the file
    duration = overrides["run.duration_s"]
    if not isinstance(duration, int | float) or isinstance(duration, bool):
        return overrides, []
    if "run.warmup_s" in overrides:
        given = overrides["run.warmup_s"]
        if isinstance(given, int | float) and given >= duration:
            raise ScenarioError(f"{path}: --duration {duration:g} is not longer than the warm-up "
                                f"run.warmup_s = {given:g} given with --set: shorten the warm-up or "
                                "lengthen the run")
        return overrides, []
    if warmup < duration or full <= 0:
        return overrides, []
    scaled = round(warmup * duration / full, 6)
    note = (f"run.warmup_s scaled from {warmup:g} to {scaled:g} s (same fraction of the run) to fit "
            f"--duration {duration:g}{hint}")
    print(f"note: {path}: {note}", file=sys.stderr)
    return {**overrides, "run.warmup_s": scaled}, [note]


class Recorder:
    """``run.json`` written when the run starts and completed when it ends, however it ends."""

    def __init__(self, out: Path, record: RunRecord) -> None:
        self.out, self.record, self._t0 = out, record, time.monotonic()

    def finish(self, status: int) -> None:
        if not (self.out / RECORD_FILE).exists():
            return  # removed by the run itself: it never ran (an RM that could not listen)
        wall = round(time.monotonic() - self._t0, 3)
        self.record = msgspec.structs.replace(self.record, wall_s=wall, exit_status=status)
        save(self.out, self.record)


@contextmanager
def recorded(out: Path, command: Literal["run", "rm", "experiment"], source: str, scenario: Scenario,
             overrides: dict[str, Any], adjustments: list[str], *, check_invariants: bool = False,
             served: bool = False) -> Iterator[Recorder]:
    data, dropped = scenario_data(scenario, Path(source), overrides)
    secrets = ["rm.credentials (given inline: not written; a rerun uses a random secret)"] if dropped else []
    record = RunRecord(
        command=command, scenario_file=source, overrides=redacted(overrides), adjustments=adjustments,
        seed=scenario.run.seed, clock=scenario.run.clock, check_invariants=check_invariants,
        served=served, version=emulator_version(), commit=source_commit(), machine=this_machine(),
        started_at=now_iso(), secrets_omitted=secrets,
    )
    write_record(out, record, data)
    rec = Recorder(out, record)
    try:
        yield rec
    except InvariantViolation:
        rec.finish(3)
        raise
    except (KeyboardInterrupt, SystemExit):
        rec.finish(EXIT_STOPPED)
        raise
    except ScenarioError:
        rec.finish(2)
        raise
    except BaseException:
        rec.finish(1)
        raise


def compare_summaries(original: bytes, new: bytes) -> tuple[bool, list[str]]:
    """(identical apart from wall-clock fields, the top-level fields that differ otherwise)."""
    if original == new:
        return True, []
    a, b = msgspec.json.decode(original), msgspec.json.decode(new)
    keys = sorted((set(a) | set(b)) - set(WALL_CLOCK_FIELDS))
    differ = [k for k in keys if a.get(k) != b.get(k)]
    return not differ, differ


def report_rerun(original_dir: Path, out: Path, record: RunRecord, status: int) -> int:
    """Print whether the rerun's summary.json matches the original's; a virtual-time run that does
    not match is a failure (exit 1)."""
    old, new = original_dir / "summary.json", out / "summary.json"
    if not old.exists() or not new.exists():
        missing = old if not old.exists() else new
        print(f"rerun: cannot compare the results: no {missing}", file=sys.stderr)
        return status or 1
    same, differ = compare_summaries(old.read_bytes(), new.read_bytes())
    if old.read_bytes() == new.read_bytes():
        print(f"rerun: results match: {new} is byte-identical to {old}", file=sys.stderr)
        return status
    if same:
        print(f"rerun: results match: {new} equals {old} apart from wall-clock fields "
              f"({', '.join(WALL_CLOCK_FIELDS)})", file=sys.stderr)
        return status
    shown = ", ".join(differ[:12]) + (", ..." if len(differ) > 12 else "")
    if record.clock == "virtual" and not record.served:
        print(f"rerun: results DIFFER from {old}: {shown}", file=sys.stderr)
        return status or 1
    print(f"rerun: results differ from {old} ({shown}): expected of a real-time run, whose figures "
          "depend on the machine's timing", file=sys.stderr)
    return status
