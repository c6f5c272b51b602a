"""Stochastic bin packing (design.md §3b): each admission method on hand-computed cases, the
RM's admission on observed usage (a new task counts as its request), the analytical checks (the
1.496 bound for normal demands and the normal-percentile bin sizes), and a small E5 run."""

from __future__ import annotations

import math
import random
from pathlib import Path

import pytest

from emulator.cli.main import main
from emulator.models.binpacking.offline import E5Config, TaskGroup, baselines, normal_bound, run_e5
from rm.borg.sbp import (
    Admission,
    cantelli_b,
    fits_av,
    fits_cantelli,
    fits_emp_perc,
    fits_gpa_g,
    fits_gpa_sqrt,
    fits_perc,
    node_series,
    percentile,
    z,
)
from rm.borg.task_usage import record_usage
from rm.protocol import ContainerUsage, Resources, UsageModel
from rm.scheduler.borg_config import AdmissionConfig, AdmissionMethod
from rm.state.cluster import Allocation, Cluster
from rm.state.observed_usage import Observations
from rm.state.operations import OperationSpec
from rm.state.workload import WorkloadBook
from tests.helpers import RecordingLink


def test_quantiles_by_hand() -> None:
    assert z(0.9) == pytest.approx(1.281552, abs=1e-6)
    assert z(0.99) == pytest.approx(2.326348, abs=1e-6)
    assert z(0.999) == pytest.approx(3.090232, abs=1e-6)
    assert cantelli_b(0.01) == pytest.approx(math.sqrt(99))  # 1 / (1 + 99) = 0.01
    assert percentile(list(range(1, 101)), 0.99) == 99  # nearest rank: ceil(0.99 * 100) = 99th
    assert percentile([3.0, 1.0, 2.0], 0.5) == 2.0


def test_av_and_perc() -> None:
    assert fits_av([0.4, 0.4], 1.25, 1.0)  # 1.25 x 0.8 = 1.0
    assert not fits_av([0.4, 0.41], 1.25, 1.0)  # 1.0125
    assert fits_av([0.5, 0.5], 1.0, 1.0) and not fits_av([0.5, 0.5], 2.0, 1.0)
    assert fits_perc([0.3, 0.7], 1.0) and not fits_perc([0.3, 0.71], 1.0)


def test_gpa_g_and_cantelli() -> None:
    # μ = 0.6, σ = √0.03 = 0.1732; 0.6 + 2.3263 x 0.1732 = 1.0029.
    assert not fits_gpa_g([0.3, 0.2, 0.1], [0.1] * 3, 0.99, 1.0)
    assert fits_gpa_g([0.3, 0.2, 0.1], [0.1] * 3, 0.99, 1.003)
    # μ = 0.5, σ = 0.05 (3-4-5); b = √99 = 9.95: 0.5 + 0.4975 = 0.9975 fits, σ = 0.051 does not.
    assert fits_cantelli([0.2, 0.3], [0.03, 0.04], 0.99, 1.0)
    assert not fits_cantelli([0.2, 0.3], [0.03, math.sqrt(0.051**2 - 0.03**2)], 0.99, 1.0)


def test_gpa_sqrt_and_emp_perc() -> None:
    # √ of [0.25, 0.81] = [0.5, 0.9]: mean 0.7, sd 0.2. At SLO 50% (z = 0): 0.7² = 0.49.
    assert fits_gpa_sqrt([0.25, 0.81], 0.5, 0.49) and not fits_gpa_sqrt([0.25, 0.81], 0.5, 0.48)
    # z(0.8413) ≈ 1: (0.7 + 0.2)² = 0.81.
    assert fits_gpa_sqrt([0.25, 0.81], 0.841345, 0.8101) and not fits_gpa_sqrt([0.25, 0.81], 0.841345, 0.80)
    series = [0.5] * 98 + [0.9, 1.2]
    assert fits_emp_perc(series, 0.99, 1.0)  # the 99th of 100 is 0.9
    assert not fits_emp_perc(series, 0.995, 1.0)  # the 100th is 1.2


@pytest.mark.parametrize(
    ("method", "fits"),
    [
        ("request", True),  # admission adds nothing to the request check
        ("av", True),  # 1.25 x (3 + 3 + 2) = 10 <= 10
        ("gpa-g", True),  # 8 + 2.33 x √(0.5² + 0.5²) = 9.65 <= 10 (see below)
        ("emp-perc", True),
    ],
)
def test_admission_uses_observed_usage_and_a_new_task_counts_as_its_request(
    method: AdmissionMethod, fits: bool
) -> None:
    cluster = Cluster()
    book = WorkloadBook()
    book.add_pool("p")
    node = cluster.add("n", Resources(10, 100), RecordingLink(), 0.0)
    def spec(name: str, cpu: float, tasks: int = 1) -> OperationSpec:
        return OperationSpec(name=name, pool="p", demand=Resources(cpu, 1), durations=[9.0] * tasks)

    running = book.add_operation(spec("r", 5, 2), 0)
    for k in range(2):
        alloc = Allocation(k, node, running, running.take_task(0), 0.0)
        cluster.place(alloc, 0.0)
        alloc.observed = Observations(100)
        for _ in range(50):  # requests 5 cores, uses 2.5 or 3.5: mean 3, sd 0.5
            alloc.observed.add(2.5, 1.0)
            alloc.observed.add(3.5, 1.0)
    # The node's load over the aligned reports: 2.5 + 2.5 = 5 and 3.5 + 3.5 = 7, alternating.
    new = book.add_operation(spec("new", 2), 0)
    adm = Admission(AdmissionConfig(method=method, slo=0.99))
    if method == "gpa-g":
        # μ = 3 + 3 + 2 (the new task: its request, no variance) = 8, σ = √0.5 = 0.707:
        # 8 + 2.326 x 0.707 = 9.645 <= 10 fits; at SLO 99.99% (z = 3.719): 10.63 does not.
        assert adm.admits(node, new)
        assert not Admission(AdmissionConfig(method=method, slo=0.9999)).admits(node, new)
    else:
        assert adm.admits(node, new) is fits
    if method == "emp-perc":  # node series + 2: [7, 9]; a 4-core task: [9, 11] overflows half the time
        big = book.add_operation(spec("big", 4), 0)
        assert not adm.admits(node, big)


@pytest.mark.parametrize("method", ["gpa-g", "emp-perc", "av"])
def test_a_task_observed_less_than_min_samples_counts_as_its_request(method: AdmissionMethod) -> None:
    cluster = Cluster()
    book = WorkloadBook()
    book.add_pool("p")
    node = cluster.add("n", Resources(10, 100), RecordingLink(), 0.0)
    running = book.add_operation(
        OperationSpec(name="r", pool="p", demand=Resources(8, 1), durations=[9.0]), 0)
    alloc = Allocation(0, node, running, running.take_task(0), 0.0)
    cluster.place(alloc, 0.0)
    alloc.observed = Observations(100)
    for _ in range(5):  # requests 8 cores, uses 1
        alloc.observed.add(1.0, 1.0)
    new = book.add_operation(OperationSpec(name="n", pool="p", demand=Resources(4, 1), durations=[9.0]), 0)
    # Five samples of 1 core: 1 + 4 fits; while fewer than min_samples, 8 + 4 does not.
    assert Admission(AdmissionConfig(method=method, min_samples=5, av_factor=1.0)).admits(node, new)
    assert not Admission(AdmissionConfig(method=method, min_samples=6, av_factor=1.0)).admits(node, new)


def test_the_normal_bound_of_the_lecture_holds() -> None:
    nb = normal_bound()
    assert nb["max_found"] <= 1.496
    assert nb["max_found"] == pytest.approx(1.25, abs=1e-3)  # a + √(1 − a) at a = 3/4
    # Random bins of normal items whose effective sizes 1/N sum to at most 1.
    rng = random.Random(5)
    zeta = z(0.999)
    worst = 0.0
    for _ in range(2000):
        k = rng.randint(2, 6)
        u = [rng.random() for _ in range(k)]
        total = sum(u) / rng.uniform(0.5, 1.0)
        u = [x / total for x in u]  # Σ 1/N_i <= 1
        t = [rng.random() for _ in range(k)]
        mu = [ti * ui for ti, ui in zip(t, u, strict=True)]
        sd = [(1 - ti) * math.sqrt(ui) / zeta for ti, ui in zip(t, u, strict=True)]
        worst = max(worst, sum(mu) + zeta * math.sqrt(sum(s * s for s in sd)))
    assert worst <= 1.496


def test_normal_percentile_bin_sizes() -> None:
    # Fit the CV to the lecture's 90% size (1.294) and read the normal's other sizes off it.
    c = 0.294 / z(0.9)
    sizes = [1 + z(p) * c for p in (0.9, 0.99, 0.999, 0.9999)]
    assert sizes == pytest.approx([1.294, 1.5337, 1.7090, 1.8532], abs=1e-4)
    # Relative to the 90% SLO: the normal grows faster than the trace (1.15 / 1.27 / 1.36).
    rel = [s / sizes[0] for s in sizes]
    assert rel == pytest.approx([1.0, 1.1853, 1.3207, 1.4321], abs=1e-4)


def small_config() -> E5Config:
    return E5Config(
        tasks=60, history_samples=100, test_samples=200, slos=[0.9, 0.99], bin_tasks=10,
        groups=[TaskGroup(share=1.0, size_min=0.05, size_max=0.15,
                          usage=UsageModel(kind="normal", mean=0.6, cv=0.3))],
    )


def test_e5_orders_methods_as_the_lecture_does() -> None:
    data = run_e5(small_config())
    by = {(r["method"], r["slo"]): r for r in data["rows"]}
    # Requests reserve the most; av 1.0 packs by the mean and overflows most.
    assert by[("request", 0.9)]["machines"] > by[("gpa-g", 0.99)]["machines"] >= by[("av 1", 0.9)]["machines"]
    assert by[("av 1", 0.9)]["overflow"] > 0.1
    assert by[("gpa-g", 0.99)]["overflow"] < by[("gpa-g", 0.9)]["overflow"]  # a tighter SLO costs machines
    assert by[("gpa-g", 0.99)]["machines"] >= by[("gpa-g", 0.9)]["machines"]
    assert by[("cantelli", 0.99)]["machines"] >= by[("gpa-g", 0.99)]["machines"]  # distribution-free
    base = baselines(small_config())
    row = base["rows"][0]
    assert row["ffd"] <= row["first-fit"] <= row["next-fit"] and row["lower_bound"] <= row["ffd"]


def test_e5_parameter_errors_name_the_field(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    p = tmp_path / "e5.toml"
    p.write_text('model = "sbp-offline"\n[params]\ntasks = 10\n[[params.groups]]\nshare = 1\nsize_min = 0.2\n'
                 "size_max = 0.1\nusage = { kind = 'normal' }\n")
    assert main(["study", str(p)]) == 2
    assert "at `params.groups[0]`: `size_max` must be >= `size_min`" in capsys.readouterr().err
    p.write_text('model = "sbp-offline"\nparams = { methods = ["magic"], groups = [] }\n')
    assert main(["study", str(p)]) == 2
    assert "at `params.methods[0]`" in capsys.readouterr().err


EMULATED = """
[cluster]
nodes = [{{ count = 2, cpu = 16, ram_gib = 64 }}]
[heartbeat]
interval_s = 2.0
usage_sample_s = 2.0
overcommit = 3.0
[scheduler.placement]
policy = "best-fit"
overcommit = 3.0
[scheduler.admission]
method = "{method}"
slo = 0.99
[[workload.operations]]
name = "early"
cpu = 4
ram_gib = 4
tasks = 8
seconds_mean = 10000
usage.cpu = {{ kind = "normal", mean = 0.3, cv = 0.2 }}
usage.ram = {{ kind = "constant", mean = 0.5 }}
[[workload.operations]]
name = "late"
cpu = 4
ram_gib = 4
tasks = 40
seconds_mean = 10000
submit_at_s = 300
usage.cpu = {{ kind = "normal", mean = 0.3, cv = 0.2 }}
usage.ram = {{ kind = "constant", mean = 0.5 }}
[run]
duration_s = 600
seed = 3
"""


def test_admission_in_a_run_packs_by_observed_usage(tmp_path: Path) -> None:
    from emulator.harness.runner import run_blocking
    from emulator.results.usage import usage_summary
    from emulator.scenario.loader import load_scenario

    running: dict[str, int] = {}
    overflow: dict[str, float] = {}
    for method in ("request", "gpa-g", "emp-perc"):
        path = tmp_path / f"{method}.toml"
        path.write_text(EMULATED.format(method=method))
        over = {} if method != "request" else {"scheduler.placement.overcommit": 1.0}
        out = run_blocking(load_scenario(path, over))
        running[method] = sum(v.running for v in out.operations)
        overflow[method] = usage_summary(out.nodes)["machine_overflow_fraction"]
    # Requests only: 2 nodes x 16 cores / 4 = 8 tasks. The running tasks use ~1.2 of their 4
    # cores; once observed, the admission counts that (a new task still counts as its 4-core
    # request): per node 1.2·n + 4 + z·σ <= 16, about 9-10 tasks, 19 or so in all.
    assert running["request"] == 8 and overflow["request"] == 0.0
    assert 16 <= running["gpa-g"] <= 22, (running, overflow)
    assert 16 <= running["emp-perc"] <= 22, (running, overflow)
    # CPU usage above capacity (throttling) in about the SLO's 1% of node-time, not much more.
    assert overflow["gpa-g"] < 0.03 and overflow["emp-perc"] < 0.03, overflow


def test_delta_reports_keep_a_nodes_histories_aligned() -> None:
    # A delta heartbeat reports only the container whose usage moved; the other's history takes
    # its last reported value again, so sample i of both is of one heartbeat (emp-perc sums them).
    cluster = Cluster()
    book = WorkloadBook()
    book.add_pool("p")
    node = cluster.add("n", Resources(10, 100), RecordingLink(), 0.0)
    op = book.add_operation(
        OperationSpec(name="r", pool="p", demand=Resources(4, 1), durations=[9.0] * 2), 0)
    a, b = (Allocation(k, node, op, op.take_task(0), 0.0) for k in range(2))
    for alloc in (a, b):
        cluster.place(alloc, 0.0)
    record_usage(node, (ContainerUsage(0, 1.0, 0.5), ContainerUsage(1, 2.0, 0.5)), 10)
    record_usage(node, (ContainerUsage(0, 3.0, 0.5),), 10)  # only container 0 moved
    assert a.observed is not None and b.observed is not None
    assert list(a.observed.cpu) == [1.0, 3.0] and list(b.observed.cpu) == [2.0, 2.0]
    assert node_series(node, 0, 0.0) == [3.0, 5.0]
