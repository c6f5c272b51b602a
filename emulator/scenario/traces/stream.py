"""Reading a large trace a line at a time: plain or gzip (recognised by its first bytes), bounded
in bytes (those read, decompressed) and in line length, with a progress callback; and the job
window (``start_s``, ``span_s``, ``sample``, ``max_jobs``) applied while reading, so that a
multi-GB file needs memory only for the jobs kept."""

from __future__ import annotations

import gzip
import os
import stat
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from emulator.scenario.traces.model import Limits, TraceError, TraceJob

# A line longer than this is refused (a trace line is a few hundred bytes).
MAX_LINE = 1 << 20
# Called with (bytes of the file read so far, the file's size).
Progress = Callable[[int, int], None]
_PROGRESS_EVERY = 1 << 20


@dataclass
class Window:
    """Which jobs are kept, decided as each job is met in the file's order: those submitted in
    ``[t0 + start_s, t0 + start_s + span_s)`` (``t0``: the first job's submit), every
    ``sample``-th of them, at most ``max_jobs``. The trace archives are in time order, so this is
    the same selection ``[workload.trace]`` makes of a whole trace."""

    start_s: float = 0.0
    span_s: float | None = None
    sample: int = 1
    max_jobs: int | None = None
    t0: float | None = None
    seen: int = 0  # jobs in the window so far (kept or sampled out)
    kept: int = 0

    def keep(self, submit_s: float) -> bool:
        if self.t0 is None:
            self.t0 = submit_s
        if self.full or submit_s < self.t0 + self.start_s or self.past(submit_s):
            return False
        self.seen += 1
        if (self.seen - 1) % self.sample:
            return False
        self.kept += 1
        return True

    def past(self, t: float) -> bool:
        """``t`` is after the window's end (a file in time order has no more jobs to keep)."""
        return self.t0 is not None and self.span_s is not None and t >= self.t0 + self.start_s + self.span_s

    @property
    def full(self) -> bool:
        return self.max_jobs is not None and self.kept >= self.max_jobs


class Lines:
    """The decoded lines of a trace file, numbered from 1, with their ends stripped; a context
    manager, so that the file is closed however reading ends (``with Lines(...) as lines``)."""

    def __init__(self, path: Path, limits: Limits, progress: Progress | None = None) -> None:
        self.path = path
        self.limits = limits
        self.progress = progress
        self.line_no = 0
        self.size = 0
        self._read = 0
        self._files: tuple[IO[bytes], IO[bytes]] | None = None

    def __enter__(self) -> Lines:
        self._files = _open(self.path, self.limits)
        self.size = os.fstat(self._files[0].fileno()).st_size
        return self

    def __exit__(self, *exc: object) -> None:
        if self._files is not None:
            raw, f = self._files
            self._files = None
            f.close()
            raw.close()
            if self.progress is not None:
                self.progress(self.size, self.size)

    def __iter__(self) -> Iterator[str]:
        assert self._files is not None, "use `with Lines(...) as lines`"
        raw, f = self._files
        last_report = 0
        while True:
            try:
                data = f.readline(MAX_LINE + 1)
            except (OSError, EOFError, zlib.error) as err:  # a damaged or truncated gzip
                raise TraceError(f"{self.path}: line {self.line_no + 1}: cannot read: "
                                 f"{err or 'the compressed data ends early'}") from None
            if not data:
                return
            self.line_no += 1
            self._read += len(data)
            if len(data) > MAX_LINE:
                raise TraceError(f"{self.path}: line {self.line_no}: longer than {MAX_LINE:,} bytes; "
                                 "expected one record per line")
            if self._read > self.limits.max_bytes:
                raise TraceError(f"{self.path}: line {self.line_no}: more than {self.limits.max_bytes:,} "
                                 "bytes (decompressed); expected at most that (`max_bytes`, --max-bytes)")
            if self.progress is not None and self._read - last_report >= _PROGRESS_EVERY:
                last_report = self._read
                self.progress(raw.tell(), self.size)
            try:
                text = data.decode("utf-8").rstrip("\r\n")
            except UnicodeDecodeError as err:
                raise TraceError(f"{self.path}: line {self.line_no}: not UTF-8 text (byte {err.start})") \
                    from None
            yield text.lstrip("\ufeff") if self.line_no == 1 else text


def _open(path: Path, limits: Limits) -> tuple[IO[bytes], IO[bytes]]:
    """The raw file and what to read lines from (the same file, or its gzip stream). Refuses what
    is not a regular file without opening it (a pipe would block), and a plain file over
    ``max_bytes`` unread."""
    not_regular = TraceError(f"{path}: expected a regular file (not a device, pipe or directory)")
    try:
        if not stat.S_ISREG(os.stat(path).st_mode):
            raise not_regular
        raw = path.open("rb")
    except FileNotFoundError:
        raise TraceError(f"{path}: no such file") from None
    except OSError as err:
        raise TraceError(f"{path}: cannot read: {err}") from None
    try:
        st = os.fstat(raw.fileno())
        if not stat.S_ISREG(st.st_mode):  # replaced in between
            raise not_regular
        magic = raw.read(2)
        raw.seek(0)
        if magic == b"\x1f\x8b":
            return raw, gzip.GzipFile(fileobj=raw, mode="rb")  # type: ignore[return-value]
        if st.st_size > limits.max_bytes:
            raise TraceError(f"{path}: {st.st_size:,} bytes; expected at most {limits.max_bytes:,} "
                             "(`max_bytes`, --max-bytes)")
        return raw, raw
    except BaseException:
        raw.close()
        raise


def finish(jobs: list[TraceJob]) -> list[TraceJob]:
    """The jobs that have a task, in submit order."""
    return sorted((j for j in jobs if j.tasks), key=lambda j: j.submit_s)
