"""What the emulator measures about itself: the log histogram's quantiles, and heartbeat lateness
as a stalled node process really shows it."""

from __future__ import annotations

import random

import pytest

from emulator.harness.eventlog import make_logger
from emulator.harness.nodeproc import NodeProcess
from emulator.measure.timing import HeartbeatTiming
from nodemanager.config import HeartbeatConfig
from nodemanager.stats import NodeCounters
from rm.protocol import Heartbeat, RegisterResponse, Resources
from rm.queues.histogram import LogHistogram
from tests.helpers import FakeClock, RecordingLink


def test_quantiles_are_within_the_bucket_error_of_the_exact_ones() -> None:
    rng = random.Random(5)
    values = [rng.lognormvariate(-3, 1.5) for _ in range(20_000)]
    h = LogHistogram()
    for v in values:
        h.add(v)
    values.sort()
    for q in (0.1, 0.5, 0.9, 0.99, 0.999):
        exact = values[int(q * len(values)) - 1]
        # The upper edge of the value's bucket: never below it, at most one bucket (~4.4%) above.
        assert exact <= h.quantile(q) <= exact * 2 ** (1 / 16) * 1.0001, q
    assert h.max == values[-1] and h.quantile(1.0) == values[-1]
    assert h.mean() == pytest.approx(sum(values) / len(values))


def test_add_many_is_the_same_as_adding_one_at_a_time() -> None:
    one, many = LogHistogram(), LogHistogram()
    for value, n in ((0.0, 7), (3e-6, 40), (0.25, 3), (2.0, 1)):
        for _ in range(n):
            one.add(value)
        many.add_many(value, n)
    many.add_many(5.0, 0)
    assert (many.count, many.zeros, many.max) == (one.count, one.zeros, one.max)
    assert many.sum == pytest.approx(one.sum)
    qs = (0.1, 0.5, 0.9, 0.99)
    assert [many.quantile(q) for q in qs] == [one.quantile(q) for q in qs]


def test_add_values_buckets_every_value_as_add_does() -> None:
    rng = random.Random(11)
    batches = [[0.0, 1e-10, 5e-10, *(rng.lognormvariate(-11, 3) for _ in range(3000))],
               [rng.lognormvariate(-2, 1) for _ in range(50)], [], [0.0, 0.0]]
    one, batched = LogHistogram(), LogHistogram()
    for batch in batches:
        for v in batch:
            one.add(v)
        batched.add_values(batch)
    assert batched._buckets == one._buckets
    assert (batched.count, batched.zeros, batched.max) == (one.count, one.zeros, one.max)
    assert batched.sum == pytest.approx(one.sum, rel=1e-9)


def test_zeros_and_an_empty_histogram() -> None:
    h = LogHistogram()
    assert h.quantile(0.5) == 0.0 and h.mean() == 0.0
    for _ in range(90):
        h.add(0.0)
    for _ in range(10):
        h.add(1.0)
    assert h.quantile(0.5) == 0.0 and h.quantile(0.9) == 0.0
    assert h.quantile(0.95) == pytest.approx(1.0)


def test_a_stalled_process_shows_the_lateness_of_its_held_tick() -> None:
    clock = FakeClock()
    timing = HeartbeatTiming(interval_s=10.0)
    link = RecordingLink()
    proc = NodeProcess(
        "n", Resources(4, 8), HeartbeatConfig(interval_s=10.0), clock, NodeCounters(),
        make_logger(clock, None), phase_s=1.0, timing=timing,
    )
    proc.attach(link)
    proc.start()
    clock.advance_to(1.5)
    proc.receive(RegisterResponse(action="normal", machine_id=1))
    clock.advance_to(30.0)  # ticks at 11 and 21, on time
    assert timing.summary().max == 0.0 and timing.summary().count == 2
    proc.pause(7.5)  # 30 .. 37.5: the tick due at 31 runs at 37.5
    clock.advance_to(40.0)
    s = timing.summary()
    assert s.count == 3
    assert s.max == pytest.approx(6.5)
    assert len(link.of(Heartbeat)) == 1  # the first one is unanswered: one in flight


def test_the_lag_verdict_leaves_out_ticks_an_injected_pause_held_back() -> None:
    clock = FakeClock()
    timing = HeartbeatTiming(interval_s=10.0)
    proc = NodeProcess(
        "n", Resources(4, 8), HeartbeatConfig(interval_s=10.0), clock, NodeCounters(),
        make_logger(clock, None), phase_s=1.0, timing=timing,
    )
    proc.attach(RecordingLink())
    proc.start()
    clock.advance_to(1.5)
    proc.receive(RegisterResponse(action="normal", machine_id=1))
    clock.advance_to(30.0)
    proc.pause(7.5)
    clock.advance_to(45.0)  # the tick due at 31 ran at 37.5 (held), the one at 41 on time
    assert timing.summary().max == pytest.approx(6.5) and timing.summary().count == 4
    own = timing.own_summary()
    assert own.count == 3 and own.max == 0.0
