"""/metrics: Prometheus text format, parsed back with prometheus-client's own parser."""

from __future__ import annotations

import aiohttp
import msgspec
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.webrun import served, small_scenario, wait_for


async def scrape(s: aiohttp.ClientSession, url: str) -> dict[str, dict[tuple[tuple[str, str], ...], float]]:
    async with s.get(url + "metrics") as resp:
        assert resp.status == 200
        assert resp.headers["Content-Type"].startswith("text/plain")
        text = await resp.text()
    out: dict[str, dict[tuple[tuple[str, str], ...], float]] = {}
    types = {}
    for fam in text_string_to_metric_families(text):
        types[fam.name] = fam.type
        for sample in fam.samples:
            out.setdefault(sample.name, {})[tuple(sorted(sample.labels.items()))] = sample.value
    out["__types__"] = {(("name", k),): 0.0 for k in types}
    scrape.types = types  # type: ignore[attr-defined]
    return out


@pytest.mark.asyncio
async def test_metrics_follow_conventions_and_move() -> None:
    async with served(small_scenario(expiry_s=4.0), allow_control=True) as srv, srv.session() as s:

        async def registered() -> bool:
            m = await scrape(s, srv.url)
            return m.get("hbemu_nodes", {}).get((("state", "running"),)) == 12

        await wait_for(registered)
        first = await scrape(s, srv.url)
        types = scrape.types  # type: ignore[attr-defined]
        for counter in ("hbemu_heartbeats_sent", "hbemu_heartbeat_responses", "hbemu_rm_busy_seconds",
                        "hbemu_nodes_removed", "hbemu_allocations"):
            assert types[counter] == "counter", counter
            assert f"{counter}_total" in first
        for gauge in ("hbemu_rm_queue_depth", "hbemu_utilization_ratio", "hbemu_nodes", "hbemu_tasks",
                      "hbemu_emulated_time_seconds"):
            assert types[gauge] == "gauge", gauge
        assert types["hbemu_detection_latency_seconds"] == "histogram"
        assert set(first["hbemu_rm_queue_depth"]) == {(("queue", "inbound"),), (("queue", "scheduler"),)}
        util = first["hbemu_utilization_ratio"]
        assert 0 < util[(("resource", "cpu"),)] <= 1 and 0 < util[(("resource", "ram"),)] <= 1
        assert first["hbemu_capacity_cpu_cores"][()] == 12 * 16

        async def more_heartbeats() -> bool:
            m = await scrape(s, srv.url)
            return m["hbemu_heartbeats_sent_total"][()] > first["hbemu_heartbeats_sent_total"][()] + 12

        await wait_for(more_heartbeats)

        async with s.post(srv.url + "api/control/nodes",
                          data=msgspec.json.encode({"action": "crash", "nodes": ["n-0-00002"]}),
                          headers={"Content-Type": "application/json"}) as resp:
            assert resp.status == 200

        async def removed() -> bool:
            m = await scrape(s, srv.url)
            return m["hbemu_nodes_removed_total"][()] == 1

        await wait_for(removed)
        last = await scrape(s, srv.url)
        assert last["hbemu_nodes"][(("state", "lost"),)] == 1
        assert last["hbemu_nodes"][(("state", "running"),)] == 11
        assert last["hbemu_detection_latency_seconds_count"][()] == 1
        assert 3.0 <= last["hbemu_detection_latency_seconds_sum"][()] <= 7.0
        buckets = last["hbemu_detection_latency_seconds_bucket"]
        assert buckets[(("le", "+Inf"),)] == 1 and buckets[(("le", "1.0"),)] == 0
        assert last["hbemu_false_removals_total"][()] == 0
        # The scheduler's wall time per event: every update event is timed.
        decisions = last["hbemu_scheduler_decision_seconds_bucket"]
        assert decisions[(("le", "+Inf"),)] == last["hbemu_scheduler_decision_seconds_count"][()] > 0
        updates = last["hbemu_scheduler_update_events_total"][()]
        assert last["hbemu_scheduler_decision_seconds_count"][()] >= updates
