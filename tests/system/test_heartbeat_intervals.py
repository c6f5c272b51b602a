"""n_i and m_i of an in-memory run count heartbeats by the interval they were sent in, and a_i and
s_i by the interval they arrived at the RM in, as over TCP: an RM stall's late answers and updates
count in their heartbeats' interval, never in the next one, so m_i/n_i and s_i/a_i stay within
[0, 1] in the rows, on the page and in h1/h2 (virtual time, 20 nodes, about 0.2 s)."""

from __future__ import annotations

from emulator.harness.runner import RunHandle
from emulator.measure.sampler import SampleRow
from emulator.scenario.loader import scenario_from_dict
from emulator.web import views
from emulator.web.state import LiveRun
from tests.helpers import run_with_handle

SAMPLE_S = 5.0
STALL_AT, STALL_S = 33.0, 4.0  # the RM answers nothing in [33, 37): across the boundary at 35


def _stalled() -> dict[str, object]:
    return {
        "name": "stall",
        "cluster": {"nodes": [{"count": 20, "cpu": 16, "ram_gib": 64, "name": "n"}]},
        "heartbeat": {"mode": "periodic", "interval_s": 1.0},
        "workload": {"operations": [{"name": "web", "cpu": 2, "ram_gib": 4, "job_count": 40,
                                     "seconds_mean": 10, "seconds_deviation": 3, "loop": True}]},
        "faults": [{"kind": "rm_stall", "at_s": STALL_AT, "duration_s": STALL_S}],
        "run": {"duration_s": 60, "seed": 1, "sample_interval_s": SAMPLE_S, "warmup_s": 10},
    }


def test_an_rm_stall_s_late_answers_count_in_the_interval_of_their_heartbeats() -> None:
    live = LiveRun(scenario_from_dict(_stalled(), "<test>"))
    arrived: dict[float, int] = {}  # answers the nodes received by each sample (the old m_i's source)
    processed: dict[float, int] = {}  # updates the scheduler processed by each sample (the old s_i's)
    last = [0, 0]

    def on_row(handle: RunHandle, row: SampleRow) -> None:
        total = handle.hosting.counters().heartbeat_responses
        arrived[row.t_s], last[0] = total - last[0], total
        updates = handle.side.rm.snapshot().counters.update_events
        processed[row.t_s], last[1] = updates - last[1], updates

    def on_start(handle: RunHandle) -> None:
        live.attach(handle.side, handle.clock, handle.log, handle.hosting.processes)

    out, handle = run_with_handle(live.scenario, on_row=on_row, on_start=on_start)
    rows = {r.t_s: r for r in out.rows}
    assert all(0 <= r.m_i <= r.n_i for r in out.rows)
    # The stall held back the answers to [33, 35)'s heartbeats until 37: by arrival, 35's interval
    # missed them and 40's got more answers than heartbeats. They belong to 35's interval.
    before, after = rows[35.0], rows[40.0]
    assert arrived[35.0] < before.n_i and arrived[40.0] > after.n_i
    assert before.m_i == before.n_i and after.m_i == after.n_i
    assert out.h1 == 1.0
    # The same for the RM's side: the backlog's updates, processed at 37, went to 40's interval by
    # processing time (more updates than heartbeats, h2_i > 1); by arrival they are 35's.
    assert all(0 <= r.s_i <= r.a_i for r in out.rows)
    assert processed[35.0] < before.a_i and processed[40.0] > after.a_i
    assert before.s_i == before.a_i and after.s_i == after.a_i
    assert out.h2 == 1.0
    # The page's series holds the settled m_i and s_i (each point settled when the next was
    # taken), and its "now" values are those of the last settled interval.
    m_i, a_i, s_i = (live.columns.index(c) for c in ("m_i", "a_i", "s_i"))
    assert [p[m_i] for p in live.series] == [r.m_i for r in out.rows]
    assert [(p[a_i], p[s_i]) for p in live.series] == [(r.a_i, r.s_i) for r in out.rows]
    series = views.timeseries(live)["series"]  # what the page plots h2_i = s_i/a_i from
    assert all(0 <= s <= a for s, a in zip(series["s_i"], series["a_i"], strict=True))
    now = views.cluster(live)
    assert now["h1_now"] is not None and 0 <= now["h1_now"] <= 1
    assert now["h2_now"] is not None and 0 <= now["h2_now"] <= 1
    # The last interval's heartbeats had no whole interval to be answered: outside h1.
    settled = handle.side.sampler.settled_rows()
    assert settled and settled[-1].t_s == out.rows[-1].t_s - SAMPLE_S
