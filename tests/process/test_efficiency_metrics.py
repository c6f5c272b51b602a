"""h1/h2 (design.md §5/E2) and the RM cost accounting, on hand-made sequences."""

from __future__ import annotations

import re
from typing import Any

import pytest

from emulator.harness.eventlog import make_logger
from emulator.measure.arrivals import RMArrivals, worst_ratio
from emulator.measure.costs import LinearFit, RMCostMeter
from emulator.measure.decisions import DecisionTimer
from emulator.measure.sampler import COLUMNS, Sampler, SampleRow
from emulator.measure.timing import HeartbeatTiming
from rm.protocol import ContainerStatus, Heartbeat, HeartbeatResponse, Register, RegisterResponse, Resources
from rm.shell.manager import ResourceManager
from tests.helpers import FakeClock


class Link:
    closed = False

    def __init__(self) -> None:
        self.sent: list[Any] = []

    def send(self, msg: Any) -> None:
        self.sent.append(msg)

    def close(self) -> None:
        self.closed = True


def test_h1_h2_are_minima_of_per_interval_ratios() -> None:
    assert worst_ratio([(100, 100), (97, 100), (72, 80), (45, 50)]) == pytest.approx(0.9)
    # Intervals with no heartbeats do not count (delta mode: only heartbeats actually sent).
    assert worst_ratio([(0, 0), (4, 4)]) == 1.0
    assert worst_ratio([(0, 0)]) is None


def test_sampler_h1_h2_on_hand_made_rows() -> None:
    clock = FakeClock()
    rm = ResourceManager(clock, make_logger(clock, None))
    sampler = Sampler(rm, HeartbeatTiming(3.0), RMArrivals(clock, 3.0), clock, 3.0, 6.0, [])
    # Only n_i, m_i, a_i, s_i matter; t <= warm-up and n_i = 0 (a_i = 0) rows are skipped, and so is
    # the last row (its heartbeats had no whole interval to be answered). h2 is s_i/a_i, not s_i/n_i.
    zero = dict.fromkeys(COLUMNS, 0)
    for t, n, m, a, s in [(3, 10, 1, 10, 1), (6, 10, 2, 10, 2), (9, 100, 99, 80, 76), (12, 0, 0, 0, 0),
                          (15, 40, 40, 40, 40), (18, 40, 3, 40, 3)]:
        sampler.rows.append(SampleRow(**{**zero, "t_s": t, "n_i": n, "m_i": m, "a_i": a, "s_i": s}))
    assert sampler.efficiency() == (pytest.approx(0.99), pytest.approx(0.95))


def test_node_attribution_counts_a_heartbeat_in_the_interval_it_was_sent() -> None:
    timing = HeartbeatTiming(interval_s=3.0)
    timing.sent(2.9)
    timing.answered(2.9, 3.2)  # answered after the boundary: still interval 1's
    timing.sent(3.5)
    timing.answered(3.5, 6.6)  # took longer than an interval: not answered in time
    timing.sent(6.0)
    assert timing.sent_by_interval == {1: 1, 2: 1, 3: 1}
    assert timing.answered_by_interval == {1: 1}
    off = HeartbeatTiming()
    off.sent(1.0)
    assert off.sent_by_interval == {}


def test_line_fit_recovers_a_linear_cost_model() -> None:
    fit = LinearFit()
    for x in range(21):
        fit.add(x, 10e-6 + 0.5e-6 * x)
    a, b = fit.coefficients()
    assert a == pytest.approx(10e-6) and b == pytest.approx(0.5e-6)
    flat = LinearFit()
    for _ in range(5):
        flat.add(3, 2.0)
    assert flat.coefficients() == (pytest.approx(2.0), 0.0)


def test_a_fit_of_arrays_is_the_fit_of_its_pairs() -> None:
    xs = [0, 3, 3, 7, 12, 20]
    ys = [1e-6 * (4 + 0.5 * x) + 1e-7 * (i % 3) for i, x in enumerate(xs)]
    one, batch = LinearFit(), LinearFit()
    for x, y in zip(xs, ys, strict=True):
        one.add(x, y)
    batch.add_arrays(xs[:2], ys[:2])
    batch.add_arrays(xs[2:], ys[2:])
    batch.add_arrays([], [])
    assert batch.n == one.n == 6
    assert batch.coefficients() == pytest.approx(one.coefficients(), rel=1e-9)


def test_cost_meter_times_each_message_type_and_attributes_update_events() -> None:
    clock = FakeClock()
    rm = ResourceManager(clock, make_logger(clock, None))
    # As a real-time run wires it: the run's decision timer tells the RM's arrivals (h2), and the
    # meter's observer calls theirs.
    decisions = DecisionTimer()
    rm.instrument(lambda handler: handler, decisions.wrap)
    arrivals = RMArrivals(clock, 3.0)
    decisions.observer = arrivals.observer
    meter = RMCostMeter(rm)
    meter.install(decisions)
    rm.observe_heartbeat_arrivals(arrivals.stamp)  # the RM stamps arrivals (``RMSide``)
    receive = rm.receive
    meter.start()
    link = Link()
    receive(link, Register(address="n", resources=Resources(20, 40)))
    mid = link.sent[0].machine_id
    assert isinstance(link.sent[0], RegisterResponse)
    for i in range(6):
        clock.set(1.0 + 3 * i)
        statuses = tuple(ContainerStatus(c, "running") for c in range(i))
        receive(link, Heartbeat(machine_id=mid, heartbeat_id=i, healthy=True, statuses=statuses, full=True))
    meter.stop()
    assert [type(m) for m in link.sent[1:]] == [HeartbeatResponse] * 6
    assert meter.busy["Heartbeat"].count == 6
    assert meter.busy["Register"].count == 1
    assert meter.busy["NodeUpdate"].count == 7  # one per heartbeat and one for the registration
    assert meter.heartbeat_fit.n == 6
    assert meter.update_fit.n == 7
    # Inline handling: every update is processed at once, so every heartbeat counts as timely.
    assert arrivals.arrived_by_interval == {k: 1 for k in range(1, 7)}
    assert arrivals.timely_by_interval == arrivals.arrived_by_interval
    report = meter.report(nodes=1, emulated_s=18.0, speed=1.0, traffic={"frames_in": 7, "bytes_in": 700,
                                                                          "bytes_out": 350})
    assert report["rm_cost_us_per_heartbeat"] > 0
    assert report["messages_to_rm_per_node_minute"] == pytest.approx(7 / 0.3, abs=1e-3)
    assert set(report["busy_us_by_type"]) == {"Heartbeat", "NodeUpdate", "Register"}


def test_tcp_needs_the_realtime_clock() -> None:
    from emulator.scenario.loader import ScenarioError, scenario_from_dict

    with pytest.raises(ScenarioError, match=re.escape('needs `run.clock = "realtime"`')):
        scenario_from_dict({"cluster": {"nodes": [{"count": 1, "cpu": 1, "ram_gib": 1}]},
                            "transport": {"kind": "tcp"}, "run": {"duration_s": 10}}, "x.toml")
    with pytest.raises(ScenarioError, match=r"at `transport.workers`"):
        scenario_from_dict({"cluster": {"nodes": [{"count": 1, "cpu": 1, "ram_gib": 1}]},
                            "transport": {"kind": "tcp", "workers": 0},
                            "run": {"duration_s": 10, "clock": "realtime"}}, "x.toml")


def test_auto_workers_is_one_per_core_less_the_rms(monkeypatch: pytest.MonkeyPatch) -> None:
    import os

    from emulator.scenario.loader import ScenarioError, scenario_from_dict

    monkeypatch.setattr(os, "sched_getaffinity", lambda _pid: set(range(16)), raising=False)
    data = {"cluster": {"nodes": [{"count": 4, "cpu": 1, "ram_gib": 1}]},
            "transport": {"kind": "tcp", "workers": "auto"}, "run": {"duration_s": 10, "clock": "realtime"}}
    assert scenario_from_dict(data, "x.toml").transport.worker_processes() == 15
    monkeypatch.setattr(os, "sched_getaffinity", lambda _pid: {0}, raising=False)
    assert scenario_from_dict(data, "x.toml").transport.worker_processes() == 1
    data["faults"] = [{"kind": "worker_kill", "at_s": 5, "worker": 1}]
    with pytest.raises(ScenarioError, match="worker 1 of 1"):
        scenario_from_dict(data, "x.toml")


def test_the_headline_names_the_busier_process_at_and_past_each_limit() -> None:
    from emulator.study.sweep import saturates_first

    def row(mode: str, n: int, ok: bool, rm: float, host: float) -> dict[str, Any]:
        return {"mode": mode, "nodes": n, "h1": 1.0 if ok else 0.5, "h2": 1.0, "overloaded": not ok,
                "rm_cpu_percent": rm, "worker_cpu_percent": host}

    rows = [row("periodic", 1, True, 10, 5), row("periodic", 2, False, 90, 40),
            row("delta", 1, True, 2, 20), row("delta", 2, False, 5, 60), row("delta", 3, False, 99, 1)]
    verdict = saturates_first({"threshold": 0.99, "rows": rows})
    assert verdict == (
        "periodic: busier at the limit RM (RM 10%, node host 5%), past it RM (RM 90%, node host 40%); "
        "delta: busier at the limit node host (RM 2%, node host 20%), "
        "past it node host (RM 5%, node host 60%)")
    assert saturates_first({"threshold": 0.99, "rows": rows[:1]}) == "no limit reached"
