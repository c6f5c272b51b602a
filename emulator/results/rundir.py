"""A run directory belongs to one emulator process at a time.

Two runs writing one directory would interleave their events and replay each other's journal.
The process that claims a directory holds an exclusive lock on ``.lock`` in it (released by the
operating system when the process ends, however it ends); a second claim fails with a clear error.
"""

from __future__ import annotations

import fcntl
import os
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
