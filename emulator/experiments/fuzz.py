"""Fuzzing the scenario schema the way a user meets it: a file on disk, then `emulator run`.

Hypothesis generates the inputs (the strategies here are shared with tests/process/test_fuzz_scenarios.py):
random documents over the schema's keys; mutations of a valid scenario (any value at any key
path, or its own fields set to values near the bounds), written as TOML or as JSON text; random
pool trees (cycles), counts each in bounds but absurd together, values nested thousands deep;
edits of a valid scenario's TOML text; random text and random bytes. Each input is written to a file
and loaded with ``load_scenario``; it must either load or raise one clear ``ScenarioError``
naming the file. A scenario that loads must fit this machine's memory, and is run briefly
(scaled down, virtual time, invariants on). Anything else that escapes is a crash.

The same seed gives the same inputs on the same code and entry point (``inputs_digest`` says
so): hypothesis mixes constants from the loaded local modules into what it draws, so the whole
project is imported before the first draw rather than lazily by the first runs.

Needs hypothesis (the ``test`` extra): ``pip install -e '.[test]'``, or ``make fuzz``.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib
import json
import math
import pkgutil
import signal
import tempfile
import tomllib
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgspec
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import seed as hypothesis_seed
from hypothesis import strategies as st

from emulator.scenario.footprint import estimate, machine_memory
from emulator.scenario.loader import ScenarioError, load_scenario
from emulator.scenario.schema import Scenario
from emulator.time.clock import wall_time

SCENARIOS = Path(__file__).resolve().parents[2] / "scenarios"
PACKAGES = ("rm", "nodemanager", "ringmon", "emulator")


def import_project() -> None:
    """Import every module of the project, so hypothesis's pool of local constants is the same
    whatever the entry point imported and before any run has imported more."""
    for name in PACKAGES:
        package = importlib.import_module(name)
        for info in pkgutil.walk_packages(package.__path__, f"{name}."):
            if info.name.endswith(".__main__"):
                continue
            with contextlib.suppress(ImportError):  # an optional extra (e.g. dask) not installed
                importlib.import_module(info.name)

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(10**12), max_value=10**12),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=12),
)
values = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=10), inner, max_size=4)
    ),
    max_leaves=20,
)
KEYS = [
    "cluster", "heartbeat", "scheduler", "rm", "workload", "faults", "run", "transport", "name",
    "nodes", "count", "cpu", "ram_gib", "mode", "interval_s", "policy", "duration_s", "seed",
    "operations", "pools", "tasks", "job_count", "seconds_mean", "kind", "at_s", "fraction", "uniform",
]
documents = st.dictionaries(st.sampled_from(KEYS), values, max_size=6)


def mutate(base: Any, path: list[str], value: Any) -> Any:
    """``base`` with the value at ``path`` (dict keys, created as needed) replaced by ``value``."""
    if not path or not isinstance(base, dict):
        return value
    out = dict(base)
    out[path[0]] = mutate(base.get(path[0], {}), path[1:], value)
    return out


def leaves(doc: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Paths (dict keys and list indices) to every scalar of a document."""
    if isinstance(doc, dict):
        return [p for k, v in doc.items() for p in leaves(v, (*path, k))]
    if isinstance(doc, list):
        return [p for i, v in enumerate(doc) for p in leaves(v, (*path, i))]
    return [path]


def set_leaf(doc: Any, path: tuple[Any, ...], value: Any) -> Any:
    if not path:
        return value
    out = list(doc) if isinstance(doc, list) else dict(doc)
    out[path[0]] = set_leaf(doc[path[0]], path[1:], value)
    return out


# Near the edges of what the schema accepts: zero, negatives, tiny and huge, non-finite.
edge_numbers = st.one_of(
    st.sampled_from([0, 1, -1, 2, 10**9, 0.0, -0.0, 1e-300, 1e300, float("nan"), float("inf")]),
    st.integers(-5, 100_000),
    st.floats(min_value=-10.0, max_value=1e6),
)


def field_mutations(base: dict[str, Any]) -> st.SearchStrategy[Any]:
    """The valid scenario with 1-3 of its own fields set to an edge value of the same family (or
    another scalar now and then): mostly well-formed, often valid, always close to the bounds."""
    paths = leaves(base)

    def value_for(old: Any) -> st.SearchStrategy[Any]:
        if isinstance(old, bool):
            return st.booleans() | scalars
        if isinstance(old, int | float):
            return edge_numbers | scalars
        return st.text(max_size=12) | st.sampled_from(["", "fifo", "delta", "tcp", "realtime"]) | scalars

    def one_change(path: tuple[Any, ...]) -> st.SearchStrategy[tuple[tuple[Any, ...], Any]]:
        old: Any = base
        for k in path:
            old = old[k]
        return st.tuples(st.just(path), value_for(old))

    def apply(changes: list[tuple[tuple[Any, ...], Any]]) -> Any:
        doc: Any = base
        for path, value in changes:
            doc = set_leaf(doc, path, value)
        return doc

    change = st.sampled_from(paths).flatmap(one_change)
    return st.lists(change, min_size=1, max_size=3).map(apply)


def base_text(path: Path = SCENARIOS / "quickstart.toml") -> str:
    return path.read_text(encoding="utf-8")


def mutations(base: dict[str, Any]) -> st.SearchStrategy[Any]:
    return st.builds(mutate, st.just(base), st.lists(st.sampled_from(KEYS), min_size=1, max_size=4), values)


def text_edits(text: str) -> st.SearchStrategy[str]:
    """A valid file's text with 1-3 edits: a span deleted or replaced, or the file cut short."""
    n = len(text)

    def apply(edits: list[tuple[int, int, str]], cut: int | None) -> str:
        out = text
        for pos, length, insert in edits:
            pos %= len(out) + 1
            out = out[:pos] + insert + out[pos + length:]
        return out if cut is None else out[: cut % (len(out) + 1)]

    edit = st.tuples(st.integers(0, n), st.integers(0, 40), st.text(max_size=12))
    return st.builds(apply, st.lists(edit, min_size=1, max_size=3), st.none() | st.integers(0, n))


def pool_trees(base: dict[str, Any]) -> st.SearchStrategy[Any]:
    """The valid scenario with a random pool tree over a few names: parents often form cycles."""
    names = ["a", "b", "c", "root", "default"]
    pool = st.fixed_dictionaries(
        {"name": st.sampled_from(names), "parent": st.sampled_from(names)},
        optional={"weight": edge_numbers},
    )
    return st.lists(pool, max_size=5).map(lambda pools: mutate(base, ["workload", "pools"], pools))


def huge_counts(base: dict[str, Any]) -> st.SearchStrategy[Any]:
    """Counts each within its bound whose products are absurd: many big node groups, operations of
    millions of tasks repeated many times."""
    group = st.fixed_dictionaries({
        "count": st.sampled_from([1, 1000, 100_000, 1_000_000]),
        "cpu": st.sampled_from([1, 8, 1e6, 1e9]), "ram_gib": st.sampled_from([1, 16, 1e6]),
    })
    op = st.fixed_dictionaries({
        "name": st.text("abc", min_size=1, max_size=3), "cpu": st.sampled_from([1, 4, 64]),
        "ram_gib": st.sampled_from([1, 8, 512]), "tasks": st.sampled_from([0, 1, 10**6, 10**7]),
        "seconds_mean": st.sampled_from([1, 300]), "repeat": st.sampled_from([1, 50, 10**6]),
        "repeat_every_s": st.sampled_from([0, 1, 1e6]),
    })

    def build(groups: list[Any], ops: list[Any]) -> Any:
        return mutate(mutate(base, ["cluster", "nodes"], groups), ["workload", "operations"], ops)

    return st.builds(build, st.lists(group, min_size=1, max_size=12), st.lists(op, max_size=3))


def deep_text(text: str) -> st.SearchStrategy[str]:
    """A valid file with one value nested hundreds or thousands of levels deep."""
    def nest(key: str, kind: str, depth: int) -> str:
        if kind == "array":
            value = "[" * depth + "]" * depth
        elif kind == "table":
            value = "{a = " * depth + "1" + "}" * depth
        else:  # a table header of dotted keys
            return text + "\n[" + ".".join([key] * depth) + "]\nx = 1\n"
        return f"{key} = {value}\n" + text

    return st.builds(nest, st.sampled_from(KEYS), st.sampled_from(["array", "table", "dotted"]),
                     st.integers(100, 3000))


# ---- documents as files ------------------------------------------------------------------------


def _toml_string(text: str) -> str:
    """A TOML basic string: quote, backslash and control characters escaped."""
    out = []
    for c in text:
        if c in '"\\':
            out.append("\\" + c)
        elif ord(c) < 0x20 or ord(c) == 0x7F:
            out.append(f"\\u{ord(c):04x}")
        else:
            out.append(c)
    return '"' + "".join(out) + '"'


def _toml_value(v: Any) -> str | None:
    """TOML text of a value (inline tables / arrays); None for what TOML cannot hold (null)."""
    if v is None:
        return None
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        if math.isnan(v):
            return "nan"
        if math.isinf(v):
            return "inf" if v > 0 else "-inf"
        return repr(v)
    if isinstance(v, str):
        return _toml_string(v)
    if isinstance(v, list):
        items = [t for t in map(_toml_value, v) if t is not None]
        return "[" + ", ".join(items) + "]"
    if isinstance(v, dict):
        pairs = [(_toml_string(k), _toml_value(x)) for k, x in v.items()]
        return "{" + ", ".join(f"{k} = {t}" for k, t in pairs if t is not None) + "}"
    raise TypeError(type(v))


def to_toml(doc: Any) -> str:
    """A document as TOML text (nulls dropped); a non-table document becomes ``value = ...``."""
    if not isinstance(doc, dict):
        doc = {"value": doc}
    lines = []
    for k, v in doc.items():
        t = _toml_value(v)
        if t is not None:
            lines.append(f"{_toml_string(k)} = {t}")
    return "\n".join(lines) + "\n"


def to_json(doc: Any) -> str:
    return json.dumps(doc, allow_nan=True)


def inputs(base: dict[str, Any], text: str) -> st.SearchStrategy[tuple[str, bytes]]:
    """(kind, file content) pairs."""
    as_toml = st.sampled_from(["toml", "json"])

    def encode(kind: str, fmt: str, doc: Any) -> tuple[str, bytes]:
        raw = to_toml(doc) if fmt == "toml" else to_json(doc)
        return f"{kind}-{fmt}", raw.encode("utf-8")

    return st.one_of(
        st.builds(encode, st.just("document"), as_toml, documents),
        st.builds(encode, st.just("mutation"), as_toml, mutations(base)),
        st.builds(encode, st.just("field-edit"), as_toml, field_mutations(base)),
        st.builds(encode, st.just("pool-tree"), st.just("toml"), pool_trees(base)),
        st.builds(encode, st.just("huge-counts"), st.just("toml"), huge_counts(base)),
        deep_text(text).map(lambda t: ("deep", t.encode("utf-8"))),
        text_edits(text).map(lambda t: ("text-edit", t.encode("utf-8"))),
        st.text(max_size=200).map(lambda t: ("text", t.encode("utf-8"))),
        st.binary(max_size=300).map(lambda b: ("bytes", b)),
    )


# ---- running what loads ------------------------------------------------------------------------

RUN_NODES = 12  # at most this many nodes ...
RUN_SECONDS = 90.0  # ... for at most this long (emulated), in virtual time, in memory
RUN_WALL_S = 10.0  # a run taking longer (wall) is stopped and reported as slow


def scaled_down(sc: Scenario) -> Scenario:
    """The scenario made small enough to run in a fraction of a second; what is not scaled is run
    as written (faults, policies, modes, heartbeat settings). Timers below 0.5 s are raised to it,
    so a valid but absurd interval (1e-300 s) does not stand for a hang."""
    rep = msgspec.structs.replace
    left = RUN_NODES
    groups = []
    for g in sc.cluster.nodes:
        if left > 0:
            groups.append(rep(g, count=min(g.count, left)))
            left -= groups[-1].count
    ops = [
        rep(o, tasks=min(o.task_count, 40), job_count=None, repeat=min(o.repeat, 3))
        for o in sc.workload.operations
    ]
    run = sc.run
    duration = min(run.duration_s, RUN_SECONDS)
    return rep(
        sc,
        cluster=rep(sc.cluster, nodes=groups),
        workload=rep(sc.workload, operations=ops, min_task_seconds=max(sc.workload.min_task_seconds, 0.5)),
        heartbeat=rep(sc.heartbeat, interval_s=max(sc.heartbeat.interval_s, 0.5)),
        ring=rep(sc.ring, interval_s=max(sc.ring.interval_s, 0.5)),
        transport=rep(sc.transport, kind="memory", latency_s=min(sc.transport.latency_s, 1.0)),
        run=rep(
            run, duration_s=duration, warmup_s=run.warmup_s * duration / run.duration_s, clock="virtual",
            sample_interval_s=None if run.sample_interval_s is None else max(run.sample_interval_s, 0.5),
        ),
        sweep=None,
    )


class _Slow(Exception):
    pass


def _alarm(signum: int, frame: Any) -> None:
    raise _Slow()


@dataclass
class FuzzReport:
    seed: int = 0
    inputs: int = 0
    valid_runs: int = 0
    clear_errors: int = 0
    crashes: int = 0
    slow_runs: int = 0
    by_kind: dict[str, list[int]] = field(default_factory=dict)  # kind -> [inputs, valid]
    digest: Any = field(default_factory=hashlib.sha256)  # of every input, in order
    failures: list[str] = field(default_factory=list)  # the first few tracebacks / bad messages
    wall_s: float = 0.0

    def summary(self) -> dict[str, Any]:
        return {
            "seed": self.seed, "inputs_tried": self.inputs, "valid_runs": self.valid_runs,
            "clear_errors": self.clear_errors,
            "crashes": self.crashes, "slow_runs": self.slow_runs, "wall_s": round(self.wall_s, 1),
            "by_kind": {k: {"inputs": v[0], "valid": v[1]} for k, v in sorted(self.by_kind.items())},
            "inputs_digest": self.digest.hexdigest()[:16],
        }


class Fuzzer:
    def __init__(self, workdir: Path, keep_failures: Path | None = None, run_valid: bool = True) -> None:
        self.report = FuzzReport()
        self._dir = workdir
        self._keep = keep_failures
        self._run_valid = run_valid

    def _crash(self, path: Path, content: bytes, what: str) -> None:
        r = self.report
        r.crashes += 1
        if len(r.failures) < 5:
            r.failures.append(f"--- input {path.name}:\n{what}")
        if self._keep is not None:
            self._keep.mkdir(parents=True, exist_ok=True)
            (self._keep / f"crash-{r.crashes:04d}{path.suffix}").write_bytes(content)

    def one(self, kind: str, content: bytes) -> None:
        """Try one input: load it from a file, and run it if it loads."""
        r = self.report
        r.inputs += 1
        counts = r.by_kind.setdefault(kind, [0, 0])
        counts[0] += 1
        r.digest.update(len(content).to_bytes(8, "little") + content)
        path = self._dir / f"input-{r.inputs}.{'json' if kind.endswith('json') else 'toml'}"
        path.write_bytes(content)
        try:
            sc = load_scenario(path)
        except ScenarioError as err:
            text = str(err)
            if text.startswith(f"{path}: ") and "Traceback" not in text:
                r.clear_errors += 1
            else:
                self._crash(path, content, f"unclear error: {text!r}")
            return
        except Exception:
            self._crash(path, content, traceback.format_exc())
            return
        finally:
            path.unlink(missing_ok=True)
        need = estimate(sc)
        if need.total > machine_memory():  # the run is scaled down: it would not notice
            self._crash(path, content, f"loads, but needs more memory than there is: {need.explain()}")
            return
        if not self._run_valid:
            r.valid_runs += 1
            counts[1] += 1
            return
        from emulator.harness.runner import run_blocking

        previous = signal.signal(signal.SIGALRM, _alarm)
        signal.setitimer(signal.ITIMER_REAL, RUN_WALL_S)
        try:
            run_blocking(scaled_down(sc), check_invariants=True)
            r.valid_runs += 1
            counts[1] += 1
        except _Slow:
            r.slow_runs += 1
        except Exception:
            self._crash(path, content, traceback.format_exc())
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, previous)


def fuzz(examples: int, seed: int, keep_failures: Path | None = None, run_valid: bool = True,
         progress: Callable[[str], None] | None = None) -> FuzzReport:
    """``progress``: a line every 1,000 inputs (a default round takes minutes)."""
    import_project()
    text = base_text()
    base = tomllib.loads(text)
    started = wall_time()
    with tempfile.TemporaryDirectory(prefix="hbemu-fuzz-") as tmp:
        fuzzer = Fuzzer(Path(tmp), keep_failures, run_valid)
        fuzzer.report.seed = seed

        @hypothesis_seed(seed)
        @settings(
            max_examples=examples, deadline=None, database=None, phases=[Phase.generate],
            suppress_health_check=list(HealthCheck),
        )
        @given(inputs(base, text))
        def drive(item: tuple[str, bytes]) -> None:
            fuzzer.one(*item)
            r = fuzzer.report
            if progress is not None and r.inputs % 1000 == 0:
                progress(f"fuzz: {r.inputs:,} / {examples:,} inputs, {r.valid_runs:,} valid runs, "
                         f"{r.crashes} crashes, {wall_time() - started:.0f} s")

        drive()
    fuzzer.report.wall_s = wall_time() - started
    return fuzzer.report
