"""A run directory belongs to one emulator process at a time.

Two runs writing one directory would interleave their events and replay each other's journal.
The process that claims a directory holds an exclusive lock on ``.lock`` in it (released by the
operating system when the process ends, however it ends); a second claim fails with a clear error.
"""

from __future__ import annotations

import fcntl
import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from emulator.scenario.loader import ScenarioError


@contextmanager
def claim(directory: Path) -> Iterator[Path]:
    path = directory / ".lock"
    try:
        directory.mkdir(parents=True, exist_ok=True)
        f = path.open("a+", encoding="ascii")
    except OSError as err:
        raise ScenarioError(f"{directory}: cannot be the results directory (--out): {err.strerror}") from None
    try:
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            f.seek(0)
            holder = f.read().strip()
            who = f" (pid {holder})" if holder.isdigit() else ""
            raise ScenarioError(
                f"{directory}/ is in use by another emulator process{who}: give this run another --out"
            ) from None
        f.seek(0)
        f.truncate()
        f.write(f"{os.getpid()}\n")
        f.flush()
        yield directory
    finally:
        f.close()


def holds_run(directory: Path) -> bool:
    """Whether ``directory`` holds the results of an earlier run (its run record)."""
    return (directory / "run.json").exists()


def fresh_directory(directory: Path, force: bool = False) -> Path:
    """Where a run asked to write into ``directory`` goes, never over an earlier run unasked:
    ``directory`` itself when it holds no run (or ``force``: the earlier run is replaced), else the
    first of ``directory-2``, ``directory-3``, ... that holds none."""
    if force or not holds_run(directory):
        return directory
    n = 2
    while holds_run(candidate := directory.with_name(f"{directory.name}-{n}")):
        n += 1
    return candidate


def clear_run(directory: Path) -> None:
    """Remove an earlier run's files from ``directory`` (claimed by this process: its ``.lock`` stays).
    Only a directory that holds a run record is cleared: ``--force`` never empties another folder."""
    if not holds_run(directory):
        return
    for entry in directory.iterdir():
        if entry.name == ".lock":
            continue
        if entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry)
        else:
            entry.unlink()
