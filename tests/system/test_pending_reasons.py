"""Why is this waiting? The RM's reasons per waiting operation (rm/views/pending_reasons.py), as `emulator
explain` prints them and /api/operations carries them. Small clusters, virtual time, fixed seeds."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from aiohttp.test_utils import make_mocked_request
from aiohttp.web import Application

import emulator
from emulator.cli.explain import Moment, capture
from emulator.cli.main import main
from emulator.harness.guard import StopRequest
from emulator.harness.runner import RunHandle, run_scenario
from emulator.scenario.loader import scenario_from_dict
from emulator.scenario.schema import Scenario
from emulator.time.clock import LoopClock, run
from emulator.web import api
from emulator.web.keys import LIVE
from emulator.web.state import LiveRun
from rm.views.pending_reasons import PendingReasons


def scenario(nodes: list[dict[str, Any]], pools: list[dict[str, Any]], ops: list[dict[str, Any]],
             duration_s: float = 60.0, tiers: bool = False, faults: list[dict[str, Any]] | None = None,
             scheduler: dict[str, Any] | None = None) -> Scenario:
    return scenario_from_dict({
        "name": "why",
        "cluster": {"nodes": nodes},
        "heartbeat": {"mode": "periodic", "interval_s": 1.0},
        "rm": {"expiry_s": 3.0, "monitor_interval_s": 1.0},
        "scheduler": scheduler or {"policy": "drf", "tiers": {"enabled": tiers}},
        "workload": {"pools": pools, "operations": ops},
        "faults": faults or [],
        "run": {"duration_s": duration_s, "warmup_s": 0, "seed": 3},
    })


def op(name: str, pool: str, cpu: float, ram: float, tasks: int, at: float = 0.0) -> dict[str, Any]:
    return {"name": name, "pool": pool, "cpu": cpu, "ram_gib": ram, "tasks": tasks,
            "seconds_mean": 1000, "seconds_deviation": 0, "submit_at_s": at}


# Two nodes of different shapes, each running one task of `filler` (5 cpu, 10 GiB): wide has
# 3 cpu / 6 GiB left, tall 11 cpu / 2 GiB; a task of `big` (6 cpu, 6 GiB) fits neither.
NO_FIT = scenario(
    [{"count": 1, "cpu": 8, "ram_gib": 16, "name": "wide"},
     {"count": 1, "cpu": 16, "ram_gib": 12, "name": "tall"}],
    [{"name": "a"}], [op("filler", "a", 5, 10, 2), op("big", "a", 6, 6, 2, at=5)],
)
# One pool: `greedy` fills the 8 slots first, `late` comes after it with a share of 0.
ONE_POOL = scenario([{"count": 4, "cpu": 2, "ram_gib": 8, "name": "n"}], [{"name": "x"}],
                    [op("greedy", "x", 1, 1, 20), op("late", "x", 1, 1, 4, at=10)])
# Two pools of equal weight: pool b took the whole cluster before pool a had work.
TWO_POOLS = scenario([{"count": 4, "cpu": 2, "ram_gib": 8, "name": "n"}], [{"name": "a"}, {"name": "b"}],
                     [op("greedy", "b", 1, 1, 20), op("newcomer", "a", 1, 1, 4, at=10)])


# Tiers on: `mid` (tier mid) filled the cluster; `low` (tier batch, share 0) comes after it. DRF
# alone would serve `low` first; the tier layer serves `mid` first.
TIERS = scenario([{"count": 4, "cpu": 2, "ram_gib": 8, "name": "n"}], [{"name": "x"}],
                 [{**op("mid", "x", 1, 1, 20), "tier": "mid"}, op("low", "x", 1, 1, 4, at=10)], tiers=True)

# Two nodes full of `steady`'s tasks; one crashes at 5 s and its two tasks go back to wait.
CRASH = scenario([{"count": 2, "cpu": 4, "ram_gib": 8, "name": "n"}], [{"name": "x"}],
                 [op("steady", "x", 2, 2, 4)], faults=[{"kind": "crash", "at_s": 5.0, "count": 1}])

# Packing: `picky` (share 0, first in DRF order) refuses every offer (a long warm-up); `eager`
# (packing off in its pool) takes them.
PACKING = scenario([{"count": 4, "cpu": 2, "ram_gib": 8, "name": "n"}], [{"name": "a"}, {"name": "b"}],
                   [op("picky", "a", 1, 1, 6), op("eager", "b", 1, 1, 40)],
                   scheduler={"policy": "packing",
                              "packing": {"warmup_refusals": 1000, "disabled_pools": ["b"]}})


def reasons_of(moment: Moment, name: str) -> PendingReasons:
    return next(r for r in moment.reasons if r.name.split("#")[0] == name)


def test_no_node_fits_names_the_resources_and_the_closest_shortfall() -> None:
    m = capture(NO_FIT, 20.0)
    r = reasons_of(m, "big")
    assert r.pending == 2
    assert r.reasons == {"nodes_insufficient_cpu": 1, "nodes_insufficient_ram": 1}
    # wide lacks 3 of 6 cpu (half the task), tall 4 of 6 GiB (two thirds): wide is closest.
    assert r.closest is not None and r.closest.address.startswith("wide")
    assert (r.closest.cpu, r.closest.ram_gib) == (3.0, 0.0)
    assert r.lines[0] == ("0/2 nodes have room for a task (6 cpu, 6 GiB): "
                          "1 insufficient cpu, 1 insufficient ram")
    assert r.lines[1].endswith("lacks 3 cpu")


def test_an_operation_behind_in_fairness_order_names_who_goes_first() -> None:
    m = capture(ONE_POOL, 20.0)
    greedy, late = reasons_of(m, "greedy"), reasons_of(m, "late")
    assert greedy.pending == 12 and late.pending == 4
    # When a slot frees up, DRF gives it to `late` (share 0) before `greedy` (share 1).
    assert greedy.reasons["operations_ahead"] == 1
    assert [(a.name, a.dominant_share) for a in greedy.ahead] == [("late", 0.0)]
    assert "operations_ahead" not in late.reasons and late.ahead == []
    assert "pools_above_fair_share" not in greedy.reasons  # one pool: it is not above its share
    assert greedy.reasons["nodes_insufficient_cpu"] == 4


def test_a_pool_above_its_fair_share_is_a_reason() -> None:
    m = capture(TWO_POOLS, 20.0)
    greedy = reasons_of(m, "greedy")
    assert greedy.reasons["pools_above_fair_share"] == 1
    assert "pool b uses 1.000 of the cluster, above its fair share 0.500" in greedy.lines
    assert "pools_above_fair_share" not in reasons_of(m, "newcomer").reasons


def test_a_higher_tier_goes_first() -> None:
    m = capture(TIERS, 20.0)
    low, mid = reasons_of(m, "low"), reasons_of(m, "mid")
    assert low.reasons["operations_ahead"] == low.reasons["operations_ahead_higher_tier"] == 1
    assert [(a.name, a.tier) for a in low.ahead] == [("mid", "mid")]
    assert "operations_ahead" not in mid.reasons
    assert any("(x, share 1.000, tier mid)" in line for line in low.lines)


def test_tasks_of_a_lost_node_wait_again_and_say_so() -> None:
    r = reasons_of(capture(CRASH, 20.0), "steady")
    assert r.pending == 2
    assert r.reasons == {"nodes_insufficient_cpu": 1, "requeued_tasks": 2}  # the lost node is gone
    assert r.lines[-1] == ("2 of its waiting tasks ran before and were requeued "
                           "(preempted, or their node was lost)")


def test_packing_refusals_are_a_reason() -> None:
    m = capture(PACKING, 20.0)
    picky = reasons_of(m, "picky")
    n = picky.reasons["packing_refusals_in_a_row"]
    assert picky.pending == 6 and n >= 8  # at least the 8 slots' first offers
    assert f"packing refused the last {n} offers ({n} of {n} so far): it waits for a node its task " \
        "packs better on" in picky.lines
    assert "packing_refusals_in_a_row" not in reasons_of(m, "eager").reasons


def test_the_api_carries_the_reasons() -> None:
    """GET /api/operations during a run: each waiting operation's reasons and their words."""
    live = LiveRun(ONE_POOL)
    stop = StopRequest()
    answer: dict[str, Any] = {}

    def on_start(handle: RunHandle) -> None:
        live.attach(handle.side, handle.clock, handle.log, None)

        async def ask() -> None:
            app = Application()
            app[LIVE] = live
            resp = await api.get_operations(make_mocked_request("GET", "/api/operations", app=app))
            assert resp.body is not None
            answer.update(json.loads(bytes(resp.body)))  # type: ignore[arg-type]
            stop.request()

        handle.clock.call_later(20.0, lambda: asking.append(asyncio.ensure_future(ask())))

    asking: list[asyncio.Future[None]] = []

    async def main_(clock: LoopClock) -> None:
        await run_scenario(ONE_POOL, clock, None, None, False, on_start=on_start, stop=stop)

    run(main_, "virtual")
    ops = {o["name"].split("#")[0]: o for o in answer["operations"]}
    assert ops["greedy"]["pending_reasons"] == {"nodes_insufficient_cpu": 4, "operations_ahead": 1}
    assert ops["greedy"]["pending_why"][0].startswith("0/4 nodes have room for a task (1 cpu, 1 GiB)")
    assert ops["late"]["pending_reasons"] == {"nodes_insufficient_cpu": 4}


def test_explain_prints_the_reasons(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "why.toml"
    path.write_text(TOML)
    assert main(["explain", str(path), "--at", "20", "--job", "greedy"]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[:4] == [
        f"{path}, emulated to t=20 s",
        "1 operation with 12 waiting tasks",
        "",
        "greedy (id 1, pool x): 12 of 20 tasks waiting",
    ]
    assert "  1 operation goes first when room frees up, in the policy's order (this one's share 1.000): " \
        "late (x, share 0.000)" in out
    assert "  counts: nodes_insufficient_cpu=4, operations_ahead=1" in out
    # --json: the same, for scripts.
    assert main(["explain", str(path), "--at", "20", "--job", "2", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["t_s"] == 20 and doc["waiting_tasks"] == 16
    ((late,),) = [doc["operations"]]
    assert (late["name"], late["pending"], late["reasons"]) == ("late", 4, {"nodes_insufficient_cpu": 4})


def test_explain_a_results_directory_at_its_busiest_moment(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "why.toml"
    path.write_text(TOML)
    out_dir = tmp_path / "run"
    emulator.run(path, out=out_dir)  # as `emulator run` records it, without the report's plots
    assert main(["explain", str(out_dir)]) == 0
    out = capsys.readouterr().out.splitlines()
    # 16 tasks wait from t=10 s (20 + 4 tasks, 8 slots) to the end: the first such sample.
    assert out[:2] == [
        f"the run in {out_dir}, emulated to t=10 s (the sample where the most tasks waited: 16)",
        "2 operations with 16 waiting tasks",
    ]


TOML = """
name = "why"
[cluster]
nodes = [{ count = 4, cpu = 2, ram_gib = 8, name = "n" }]
[heartbeat]
mode = "periodic"
interval_s = 1.0
[[workload.pools]]
name = "x"
[[workload.operations]]
name = "greedy"
pool = "x"
cpu = 1
ram_gib = 1
tasks = 20
seconds_mean = 1000
seconds_deviation = 0
[[workload.operations]]
name = "late"
pool = "x"
cpu = 1
ram_gib = 1
tasks = 4
seconds_mean = 1000
seconds_deviation = 0
submit_at_s = 10
[run]
duration_s = 60
warmup_s = 0
seed = 3
"""


@pytest.mark.parametrize(("args", "message"), [
    (["explain", "{dir}/nowhere"], "error: {dir}/nowhere: no such results directory or scenario file\n"),
    (["explain", "{dir}"], "error: {dir}: no run.json and scenario.toml: not the directory of an "
                           "`emulator run` (give a results directory or a scenario file)\n"),
    (["explain", "{toml}", "--at", "20", "--job", "nobody"],
     "error: --job nobody: no such operation at t=20 s (an id, a name or a workload entry; live operations: "
     "greedy (id 1), late (id 2))\n"),
    (["explain", "{toml}", "--at", "100"], "error: --at 100: expected a moment of the run, 0 to 60 s\n"),
])
def test_bad_input_gets_one_clear_error(tmp_path: Path, capsys: pytest.CaptureFixture[str], args: list[str],
                                        message: str) -> None:
    toml = tmp_path / "why.toml"
    toml.write_text(TOML)
    fill = {"dir": str(tmp_path), "toml": str(toml)}
    assert main([a.format(**fill) for a in args]) == 2
    assert capsys.readouterr().err == message.format(**fill)
