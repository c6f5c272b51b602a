"""At the end of a served run the page's API and /metrics give summary.json's whole-run figures
under the registry's names, and /metrics' node states add up to the cluster size."""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path
from typing import Any

import aiohttp
import msgspec
import pytest

from emulator.harness.outcome import RunOutcome
from emulator.results import registry
from emulator.results.summary import write_results
from emulator.web.serve import serve_scenario
from emulator.web.state import LiveRun
from tests.process.test_metrics_endpoint import scrape
from tests.webrun import MAX_WALL_S, small_scenario, wait_for

NODES = 12


async def _get(s: aiohttp.ClientSession, url: str) -> Any:
    async with s.get(url) as resp:
        assert resp.status == 200
        return await resp.json()


@pytest.mark.asyncio
async def test_the_page_and_metrics_agree_with_summary_json_at_the_end(tmp_path: Path) -> None:
    # A crash of the scenario's (faults apply), a short run at 30x: about 2 s of wall time.
    sc = small_scenario(nodes=NODES, duration_s=60.0, speed=30.0, expiry_s=4.0,
                        faults=[{"kind": "crash", "at_s": 20, "count": 2}])
    ready: asyncio.Future[str] = asyncio.get_running_loop().create_future()

    def finished(outcome: RunOutcome, live: LiveRun) -> None:
        write_results(outcome, tmp_path)  # as `emulator run --serve` does

    async def main() -> Any:
        async with asyncio.timeout(MAX_WALL_S):
            return await serve_scenario(sc, "127.0.0.1", 0, on_ready=ready.set_result, on_finished=finished,
                                        linger_s=30.0, push_interval_s=0.5)

    task = asyncio.create_task(main())
    try:
        url = await asyncio.wait_for(ready, 10)
        async with aiohttp.ClientSession() as s:
            async def over() -> Any:
                c = await _get(s, url + "api/cluster")
                return c if c["phase"] == "finished" and (tmp_path / "summary.json").is_file() else None

            page = await wait_for(over, timeout_s=40)
            metrics = await scrape(s, url)
            series = (await _get(s, url + "api/timeseries"))["series"]
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
    summary = msgspec.json.decode((tmp_path / "summary.json").read_bytes())
    assert summary["crashed_nodes"] == 2 and summary["nodes_lost"] >= 2
    compared = 0
    for metric in registry.applicable(summary):
        if "." in metric.name:
            continue
        assert page.get(metric.name) == summary.get(metric.name), metric.name
        compared += 1
        if metric.prom is not None and metric.name != "preemptions":  # preemption is off: left out
            assert metrics[f"{metric.prom}_total"][()] == summary[metric.name], metric.prom
    assert compared >= 20
    for name in ("h1", "h2", "nodes_lost", "heartbeats_sent", "cpu_utilization", "false_removals"):
        assert page[name] == summary[name], name
    assert page["detection_latency_s"] == summary["detection_latency_s"]
    # Whole-run figures are bounded as defined (0 is one: an interval whose answers all came late,
    # which a real-time run on a busy machine may have); values of the last instant are *_now.
    assert 0 <= page["h1"] <= 1 and 0 <= page["h2"] <= 1
    assert "cpu_utilization_now" in page and "h1_now" in page
    # Per interval too: m_i counts answers to the interval's own heartbeats (at most n_i), and the
    # page's series holds the settled values timeseries.csv has.
    csv = (tmp_path / "timeseries.csv").read_text().splitlines()
    header = csv[0].split(",")
    rows = [dict(zip(header, line.split(","), strict=True)) for line in csv[1:]]
    assert [int(r["m_i"]) for r in rows] == series["m_i"] and [int(r["n_i"]) for r in rows] == series["n_i"]
    assert all(0 <= m <= n for m, n in zip(series["m_i"], series["n_i"], strict=True))
    # s_i likewise counts updates to the heartbeats that arrived at the RM in the interval (a_i).
    for col in ("a_i", "s_i"):
        assert [int(r[col]) for r in rows] == series[col], col
    assert all(0 <= u <= a for u, a in zip(series["s_i"], series["a_i"], strict=True))
    states = {dict(k)["state"]: v for k, v in metrics["hbemu_nodes"].items()}
    assert sum(states.values()) == NODES
    assert states["lost"] == page["nodes_gone"] == 2
