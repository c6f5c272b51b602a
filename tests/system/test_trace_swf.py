"""SWF (Parallel Workloads Archive) import: jobs, sizes, pools and the cluster checked against the
generating rows, gzip, header comments, the window applied while reading, and bad or huge input
refused with one line."""

from __future__ import annotations

import csv
import gzip
import io
import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path

import pytest

from emulator.cli.main import main
from emulator.scenario.schema import TraceConfig
from emulator.scenario.traces import swf
from emulator.scenario.traces.model import NodeGroup, Trace, TraceError
from tests.process.test_trace_bounds import emulator, one_error_line

KB_PER_GIB = 1024 * 1024
# job, submit, run, allocated procs, used KB/proc, requested procs, requested KB/proc, status, queue
ROWS = [
    (1, 0, 100, 4, 2 * KB_PER_GIB, 4, -1, 1, 1),
    (2, 30, 50, -1, -1, 2, KB_PER_GIB // 2, 1, 2),  # allocation not known: the request
    (3, 60, -1, 8, -1, 8, -1, 5, 1),  # cancelled before it ran
    (4, 90, 20, 1, -1, 1, -1, 0, -1),  # failed after 20 s; no memory, no queue
    (5, 95, 7, 3, 3 * KB_PER_GIB, 3, -1, 1, 3),
]
HEADER = ["; Version: 2.2", "; Computer: test", "; MaxNodes: 4", "; MaxProcs: 16", ";"]


def line(r: tuple[int, ...]) -> str:
    job, submit, run, procs, used, req_procs, req_mem, status, queue = r
    return " ".join(str(v) for v in (job, submit, 0, run, procs, -1, used, req_procs, -1, req_mem, status,
                                     7, 8, 9, queue, 1, -1, -1))


def write(path: Path, rows: Sequence[tuple[int, ...]], header: list[str] = HEADER, extra: str = "") -> Path:
    text = "\n".join([*header, *(line(r) for r in rows)]) + "\n" + extra
    if path.suffix == ".gz":
        path.write_bytes(gzip.compress(text.encode()))
    else:
        path.write_text(text)
    return path


def expected(rows: Sequence[tuple[int, ...]]) -> dict[str, tuple[str, float, int, float, float]]:
    """job -> (pool, submit, tasks, duration, GiB per task), read from the rows independently."""
    out = {}
    for job, submit, run, procs, used, req_procs, req_mem, _, queue in rows:
        n = procs if procs > 0 else req_procs
        if run <= 0 or n <= 0:
            continue
        kb = used if used > 0 else req_mem
        out[str(job)] = ("default" if queue < 0 else f"queue{queue}", float(submit), n, float(run),
                         kb / KB_PER_GIB if kb > 0 else 1.0)
    return out


def seen(trace: Trace) -> dict[str, tuple[str, float, int, float, float]]:
    out = {}
    for j in trace.jobs:
        (g,) = j.groups
        assert g.cpu == 1.0 and len(set(g.durations_s)) == 1
        out[j.job_id] = (j.pool, j.submit_s, len(g.durations_s), g.durations_s[0], g.ram_gib)
    return out


def cfg(**kw: object) -> TraceConfig:
    return TraceConfig(format="swf", path="x", **kw)  # type: ignore[arg-type]


@pytest.mark.parametrize("name", ["log.swf", "log.swf.gz"])
def test_jobs_sizes_and_cluster(tmp_path: Path, name: str) -> None:
    t = swf.read(write(tmp_path / name, ROWS), cfg())
    assert seen(t) == expected(ROWS) and len(t.jobs) == 4
    # MaxNodes 4 sharing MaxProcs 16; memory for a node full of the largest tasks (3 GiB a processor).
    assert t.nodes == [NodeGroup(4, 4.0, 12.0)]
    assert len(t.warnings) == 1 and "1 job(s) without a run time" in t.warnings[0]


def test_header_with_one_size_or_none(tmp_path: Path) -> None:
    only_procs = swf.read(write(tmp_path / "a.swf", ROWS, ["; MaxProcs: 6 (two partitions)"]), cfg())
    assert only_procs.nodes == [NodeGroup(6, 1.0, 3.0)]
    assert swf.read(write(tmp_path / "b.swf", ROWS, []), cfg()).nodes == []
    with pytest.raises(TraceError, match=r"b.swf: line 1: header `MaxNodes`: expected a whole number"):
        swf.read(write(tmp_path / "b.swf", ROWS, ["; MaxNodes: many"]), cfg())


def test_window_applied_while_reading(tmp_path: Path) -> None:
    # A bad line after the window is never read: the file is in submit order.
    path = write(tmp_path / "log.swf", [*ROWS, (6, 200, 5, 1, -1, 1, -1, 1, 1)], extra="not a job\n")
    with pytest.raises(TraceError, match=r"line 12: expected 18 whitespace-separated fields"):
        swf.read(path, cfg())
    t = swf.read(path, cfg(max_jobs=2))
    assert [j.job_id for j in t.jobs] == ["1", "2"]
    t = swf.read(path, cfg(start_s=20, span_s=80))  # submits in [20, 100) of the first
    assert [j.job_id for j in t.jobs] == ["2", "4", "5"]
    t = swf.read(path, cfg(sample=2, max_jobs=2))  # every 2nd job of those that ran
    assert [j.job_id for j in t.jobs] == ["1", "4"]


@pytest.mark.parametrize("text, expected", [
    ("1 0 0 x 4 -1 -1 4 -1 -1 1 1 1 1 1 1 -1 -1", "line 1: field 4 `run_time`: expected a number (-1: not "
                                                  "known), got 'x'"),
    ("1 0 0 10 4 -1 -1", "line 1: expected 18 whitespace-separated fields"),
    ("1 -5 0 10 4 -1 -1 4 -1 -1 1 1 1 1 1 1 -1 -1", "line 1: field 2 `submit_time`: expected a time >= 0"),
    ("1 0 0 10 2.5 -1 -1 4 -1 -1 1 1 1 1 1 1 -1 -1",
     "field 5 `allocated_processors`: expected a whole number"),
    ("1 0 0 10 4 -1 -1 4 -1 -1 1 1 1 1 1 1 -1 nan", "field 18 `think_time`: expected a finite number"),
    ("; only a comment\n", "no job lines"),
])
def test_bad_lines_named(tmp_path: Path, text: str, expected: str) -> None:
    path = tmp_path / "bad.swf"
    path.write_text(text + "\n")
    with pytest.raises(TraceError) as err:
        swf.read(path, cfg())
    assert str(err.value).startswith(str(path)) and expected in str(err.value), str(err.value)


def test_cli_refuses_huge_counts_and_bombs_with_one_line(tmp_path: Path) -> None:
    write(tmp_path / "big.swf", [(1, 0, 10, 1_000_000_000, -1, -1, -1, 1, 1)])
    err = one_error_line(emulator("import", "swf", "big.swf", "-o", "s.toml", cwd=tmp_path))
    assert "big.swf: line 6: `allocated_processors`: expected at most 2,000,000 tasks" in err, err
    # 64 MiB of comment lines, a few KiB compressed: refused past max_bytes as it is decompressed.
    (tmp_path / "bomb.swf.gz").write_bytes(gzip.compress((b";" + b"0" * 1022 + b"\n") * (64 << 10)))
    err = one_error_line(emulator("import", "swf", "bomb.swf.gz", "-o", "s.toml", "--max-bytes", "1000000",
                                  cwd=tmp_path))
    assert "bomb.swf.gz: line 977: more than 1,000,000 bytes (decompressed)" in err, err
    one_long_line = b"0" * (2 << 20)
    (tmp_path / "long.swf.gz").write_bytes(gzip.compress(one_long_line))
    err = one_error_line(emulator("import", "swf", "long.swf.gz", "-o", "s.toml", cwd=tmp_path))
    assert "long.swf.gz: line 1: longer than 1,048,576 bytes" in err, err
    noise = "".join(f"; {os.urandom(50).hex()}\n" for _ in range(200)).encode()
    (tmp_path / "trunc.swf.gz").write_bytes(gzip.compress(noise)[:300])
    err = one_error_line(emulator("import", "swf", "trunc.swf.gz", "-o", "s.toml", cwd=tmp_path))
    assert "trunc.swf.gz: line" in err and "cannot read" in err, err
    err = one_error_line(emulator("import", "swf", "/dev/zero", "-o", "s.toml", cwd=tmp_path))
    assert "expected a regular file" in err, err
    assert not (tmp_path / "s.toml").exists()


def test_imported_swf_replays(tmp_path: Path) -> None:
    out, run = tmp_path / "s.toml", tmp_path / "run"
    assert main(["import", "swf", str(write(tmp_path / "log.swf.gz", ROWS)), "-o", str(out),
                 "--run", str(run)]) == 0
    with (run / "jobs.csv").open() as f:
        rows = {r["job_id"]: r for r in csv.DictReader(f)}
    want = expected(ROWS)
    assert set(rows) == set(want)
    for job, (pool, submit, tasks, duration, _) in want.items():
        row_ = rows[job]
        assert (row_["pool"], float(row_["submit_s"]), int(row_["tasks"])) == (pool, submit, tasks)
        assert float(rows[job]["ideal_s"]) == duration
    assert json.loads((run / "summary.json").read_text())["jobs"]["finished"] == len(want)


def test_progress_follows_the_bytes_read_and_is_quiet_off_a_terminal(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from emulator.cli.traces import progress_bar

    rows = [(k, k, 10, 1, -1, 1, -1, 1, 1) for k in range(1, 60_001)]  # ~3 MB
    path = write(tmp_path / "big.swf", rows)
    calls: list[tuple[int, int]] = []
    assert len(swf.read(path, cfg(), lambda done, total: calls.append((done, total))).jobs) == 60_000
    size = path.stat().st_size
    assert len(calls) >= 3 and calls[-1] == (size, size)
    assert [d for d, _ in calls] == sorted(d for d, _ in calls) and {t for _, t in calls} == {size}
    with progress_bar("reading big.swf") as bar:  # pytest's stderr is no terminal
        assert bar is None

    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    term = Terminal()
    monkeypatch.setattr(sys, "stderr", term)
    with progress_bar("reading big.swf") as bar:
        assert bar is not None
        bar(size // 2, size)
    assert "reading big.swf" in term.getvalue()
