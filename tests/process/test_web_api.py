"""The status page's JSON API and push stream, against a real server on 127.0.0.1:0 while a
small scenario runs in paced real time."""

from __future__ import annotations

import asyncio
import re
import time
from typing import Any

import aiohttp
import msgspec
import pytest

from emulator.web.app import parse_bind
from tests.webrun import served, small_scenario, wait_for

JSON = {"Content-Type": "application/json"}


async def get(session: aiohttp.ClientSession, url: str) -> Any:
    async with session.get(url) as resp:
        assert resp.status == 200, await resp.text()
        return await resp.json()


async def post(session: aiohttp.ClientSession, url: str, body: Any) -> tuple[int, Any]:
    async with session.post(url, data=msgspec.json.encode(body), headers=JSON) as resp:
        return resp.status, await resp.json()


@pytest.mark.asyncio
async def test_api_documents_follow_the_run() -> None:
    async with served(small_scenario(nodes=12)) as srv, srv.session() as s:
        base = srv.url + "api/"

        async def registered() -> Any:
            c = await get(s, base + "cluster")
            return c if c.get("nodes_registered") == 12 and c["running_tasks"] > 0 else None

        c1 = await wait_for(registered)
        assert c1["phase"] == "running" and c1["scenario"] == "web-test"
        assert c1["capacity"] == {"cpu": 12 * 16.0, "ram_gib": 12 * 64.0}
        assert 0 < c1["cpu_utilization"] <= 1
        assert c1["allow_control"] is False

        nodes = await get(s, base + "nodes?per_page=5&page=2&sort=machine_id")
        assert nodes["total"] == 12 and nodes["pages"] == 3 and nodes["page"] == 2
        assert [r["machine_id"] for r in nodes["rows"]] == [6, 7, 8, 9, 10]
        assert all(r["state"] == "alive" and r["cpu"] == 16.0 for r in nodes["rows"])
        found = await get(s, base + "nodes?q=n-0-00007")
        assert [r["address"] for r in found["rows"]] == ["n-0-00007"]
        everything = (await get(s, base + "nodes?per_page=100"))["rows"]
        by_id = await get(s, base + "nodes?q=3")
        # A search matches the machine id exactly or the address as a substring.
        expect = {r["machine_id"] for r in everything if r["machine_id"] == 3 or "3" in r["address"]}
        assert {r["machine_id"] for r in by_id["rows"]} == expect and 3 in expect
        desc = await get(s, base + "nodes?sort=containers&desc=1&per_page=12")
        counts = [r["containers"] for r in desc["rows"]]
        assert counts == sorted(counts, reverse=True)

        ops = await get(s, base + "operations")
        assert {o["group"] for o in ops["operations"]} == {"web", "etl"}
        assert {p["name"] for p in ops["pools"]} == {"prod", "batch"}
        for o in ops["operations"]:
            assert 0 <= o["dominant_share"] <= 1 and o["fair_share"] is not None

        ring = await get(s, base + "ring")
        assert ring["size"] == 12 and ring["counts"]["alive"] == 12 and len(ring["arcs"]) == 12
        # A small ring: one arc per member, in the order of the source, each one alive member.
        assert [a[0] for a in ring["arcs"]] == list(range(1, 13))
        assert all(a[2:] == [1, 0, 0, 0, 0] for a in ring["arcs"])

        events = await get(s, base + "events?kinds=node.registered")
        assert len(events["events"]) == 12
        later = await get(s, base + f"events?since={events['last_seq']}")
        assert all(e["seq"] > events["last_seq"] for e in later["events"])

        ts1 = await get(s, base + "timeseries")
        assert "cpu_utilization" in ts1["columns"] and "rm_busy_fraction" in ts1["columns"]
        n1 = len(ts1["series"]["t_s"])
        await wait_for(lambda: _rows_beyond(s, base, n1))
        c2 = await get(s, base + "cluster")
        assert c2["t_s"] > c1["t_s"] and c2["heartbeats_sent"] > c1["heartbeats_sent"]


async def _rows_beyond(s: aiohttp.ClientSession, base: str, n: int) -> bool:
    ts = await get(s, base + "timeseries")
    return len(ts["series"]["t_s"]) > n


@pytest.mark.asyncio
async def test_stream_pushes_changing_ticks_at_least_once_a_second() -> None:
    async with served(small_scenario(), push_interval_s=1.0) as srv, srv.session() as s:
        ticks: list[dict[str, Any]] = []
        started = time.monotonic()
        async with s.get(srv.url + "api/stream") as resp:
            assert resp.headers["Content-Type"].startswith("text/event-stream")
            buf = b""
            async with asyncio.timeout(15):
                while len(ticks) < 4:
                    buf += await resp.content.readany()
                    while b"\n\n" in buf:
                        frame, buf = buf.split(b"\n\n", 1)
                        lines = frame.split(b"\n")
                        assert lines[0] == b"event: tick"
                        ticks.append(msgspec.json.decode(lines[1][len(b"data: "):]))
        elapsed = time.monotonic() - started
        # Four ticks at one per second: the first is immediate, so about 3 s; 6 s leaves slack
        # for a loaded machine while still failing a stream slower than 1 Hz by a wide margin.
        assert elapsed < 6.0
        assert [t["tick"] for t in ticks] == [0, 1, 2, 3]
        times = [t["cluster"]["t_s"] for t in ticks]
        assert times == sorted(times) and times[-1] > times[0]
        # Time-series rows arrive incrementally; the last one sent comes again (its m_i settles
        # at the next sample), none earlier.
        newest = -1.0
        for tick in ticks:
            sent = tick["timeseries"]["series"]["t_s"]
            assert sent == sorted(set(sent)) and all(t > newest for t in sent[1:])
            assert not sent or sent[0] >= newest
            newest = max([newest, *sent])
        assert newest > 0
        for key in ("cluster", "operations", "ring", "events"):
            assert key in ticks[-1]


@pytest.mark.asyncio
async def test_control_is_off_without_the_flag() -> None:
    async with served(small_scenario()) as srv, srv.session() as s:
        status, body = await post(s, srv.url + "api/control/run", {"action": "pause"})
        assert status == 403 and "--allow-control" in body["error"]
        status, body = await post(s, srv.url + "api/control/nodes", {"action": "crash", "count": 1})
        assert status == 403
        assert srv.live.phase.value in ("running", "starting")


@pytest.mark.asyncio
async def test_pause_freezes_emulated_time_and_resume_continues() -> None:
    async with served(small_scenario(), allow_control=True) as srv, srv.session() as s:
        base = srv.url + "api/"
        await wait_for(lambda: _t_above(s, base, 2.0))
        status, body = await post(s, base + "control/run", {"action": "pause"})
        assert status == 200 and body["phase"] == "paused" and body["changed"] is True
        t1 = (await get(s, base + "cluster"))["t_s"]
        hb1 = (await get(s, base + "cluster"))["heartbeats_sent"]
        await asyncio.sleep(0.6)
        c = await get(s, base + "cluster")
        assert c["phase"] == "paused" and c["t_s"] == t1 and c["heartbeats_sent"] == hb1
        status, body = await post(s, base + "control/run", {"action": "resume"})
        assert status == 200 and body["phase"] == "running"
        await wait_for(lambda: _t_above(s, base, t1 + 2.0))
        status, _ = await post(s, base + "control/run", {"action": "speed", "speed": 40})
        assert status == 200 and (await get(s, base + "cluster"))["speed"] == 40
        kinds = [e["event"] for e in (await get(s, base + "events?kinds=control."))["events"]]
        assert kinds == ["control.run_paused", "control.run_resumed", "control.speed_set"]


async def _t_above(s: aiohttp.ClientSession, base: str, t: float) -> bool:
    return bool((await get(s, base + "cluster"))["t_s"] > t)


@pytest.mark.asyncio
async def test_crashed_node_is_detected_removed_and_shown_everywhere() -> None:
    async with served(small_scenario(expiry_s=4.0), allow_control=True) as srv, \
            srv.session() as s:
        base = srv.url + "api/"
        await wait_for(lambda: _registered(s, base, 12))
        status, body = await post(s, base + "control/nodes", {"action": "crash", "nodes": ["n-0-00004"]})
        assert status == 200 and body["nodes"] == ["n-0-00004"]
        row = (await get(s, base + "nodes?q=n-0-00004"))["rows"][0]
        assert row["injected"] == "crashed"
        ring = await get(s, base + "ring")
        assert ring["counts"]["crashed"] == 1

        async def lost() -> Any:
            ev = await get(s, base + "events?kinds=node.lost")
            return ev["events"]

        removed = await wait_for(lost)
        assert [e["address"] for e in removed] == ["n-0-00004"]
        ring = await get(s, base + "ring")
        assert ring["counts"]["lost"] == 1 and ring["counts"]["crashed"] == 0 and ring["size"] == 11
        assert any(ch["event"] == "node.lost" for ch in ring["changes"])
        c = await get(s, base + "cluster")
        assert c["nodes_lost"] == 1 and c["false_removals"] == 0
        # The page's crash is the page's: the scenario crashed nothing.
        assert c["injected"]["crashed"] == 1 and c["scenario_faults"] == {"crashed": 0, "paused": 0}
        # Expiry 4 s, monitor every 1 s: removal 4-5 emulated seconds after the crash (plus a
        # heartbeat interval of slack for when the last processed heartbeat was).
        lat = c["detection_latency_s"]
        assert lat["count"] == 1 and 3.0 <= lat["max"] <= 7.0
        row = (await get(s, base + "nodes?q=n-0-00004"))["rows"][0]
        assert row["state"] == "lost"
        assert c["capacity"]["cpu"] == 11 * 16.0


async def _registered(s: aiohttp.ClientSession, base: str, n: int) -> bool:
    return bool((await get(s, base + "cluster")).get("nodes_registered") == n)


@pytest.mark.asyncio
async def test_paused_node_is_removed_then_rejoins_after_the_pause() -> None:
    async with served(small_scenario(expiry_s=4.0), allow_control=True) as srv, \
            srv.session() as s:
        base = srv.url + "api/"
        await wait_for(lambda: _registered(s, base, 12))
        status, body = await post(s, base + "control/nodes",
                                  {"action": "pause", "nodes": [5], "duration_s": 10})
        assert status == 200 and len(body["nodes"]) == 1
        address = body["nodes"][0]

        async def kinds() -> list[str]:
            ev = await get(s, base + "events")
            return [e["event"] for e in ev["events"] if e.get("address", e.get("node")) == address
                    or (isinstance(e.get("nodes"), list) and address in e["nodes"])]

        await wait_for(lambda: _has(kinds, "node.lost"), timeout_s=20)
        await wait_for(lambda: _has(kinds, "control.node_resumed"), timeout_s=20)
        # Its held heartbeat reaches the RM, which no longer knows it: resync, register again.
        await wait_for(lambda: _registered(s, base, 12), timeout_s=20)
        seen = await kinds()
        order = [seen.index(k) for k in ("control.node_paused", "node.lost", "control.node_resumed")]
        assert order == sorted(order)
        assert seen.count("node.registered") == 2


async def _has(kinds: Any, name: str) -> bool:
    return name in await kinds()


@pytest.mark.asyncio
async def test_bad_requests_get_clear_errors() -> None:
    async with served(small_scenario(), allow_control=True) as srv, srv.session() as s:
        base = srv.url + "api/"
        await wait_for(lambda: _registered(s, base, 12))
        async with s.get(base + "nodes?page=two") as resp:
            assert resp.status == 400 and "page" in (await resp.json())["error"]
        status, body = await post(s, base + "control/nodes", {"action": "crash", "nodes": ["nope"]})
        assert status == 400 and "nope" in body["error"]
        status, body = await post(s, base + "control/nodes", {"action": "explode", "count": 1})
        assert status == 400 and "crash" in body["error"]
        status, body = await post(s, base + "control/nodes", {"action": "crash", "fraction": 3})
        assert status == 400 and "fraction" in body["error"]
        status, body = await post(s, base + "control/run", {"action": "pause", "extra": 1})
        assert status == 400 and "extra" in body["error"]
        async with s.post(base + "control/run", data=b"{not json", headers=JSON) as resp:
            assert resp.status == 400
        # Nothing above touched the run.
        c = await get(s, base + "cluster")
        assert c["injected"] == {"crashed": 0, "paused": 0} and c["phase"] == "running"
        async with s.get(srv.url) as resp:
            assert resp.status == 200 and "<canvas id=\"ring\"" in await resp.text()
        async with s.get(srv.url + "static/vendor/uPlot.iife.min.js") as resp:
            assert resp.status == 200 and len(await resp.read()) > 40_000


def test_parse_bind() -> None:
    assert parse_bind("8080") == ("127.0.0.1", 8080)
    assert parse_bind("0.0.0.0:9000") == ("0.0.0.0", 9000)
    assert parse_bind("[::1]:7000") == ("::1", 7000)
    with pytest.raises(ValueError, match="PORT"):
        parse_bind("localhost:http")


def test_run_serve_command_end_to_end(
    tmp_path: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    from pathlib import Path

    from emulator.cli.main import main

    scenario = Path(__file__).parents[2] / "scenarios" / "quickstart.toml"
    out = tmp_path / "live"
    # 50x: at 600x uvloop's millisecond timers alone put heartbeats 0.6 emulated s late, more than
    # the lag threshold, and the run (rightly) ends "overloaded" with exit status 4; at 100x a busy
    # 2-core machine's scheduling delays (3 ms) already reach it.
    code = main(["run", str(scenario), "--serve", "127.0.0.1:0", "--speed", "50", "--duration", "330",
                 "--linger", "0", "--out", str(out), "--quiet", "--allow-control"])
    assert code == 0
    err = capsys.readouterr().err
    assert "status page: http://127.0.0.1:" in err
    # With control on, the terminal gets the run's control token, for scripts.
    assert re.search(r"control token \(X-Control-Token header\): [\w-]{32}", err), err
    summary = msgspec.json.decode((out / "summary.json").read_bytes())
    assert summary["clock"] == "realtime" and summary["nodes_alive_end"] == 50
    assert (out / "report.html").is_file() and (out / "events.jsonl").stat().st_size > 0
    assert main(["run", str(scenario), "--serve", "nohost:port", "--out", str(out), "--quiet"]) == 2


@pytest.mark.asyncio
async def test_fault_buttons_work_over_tcp_and_the_page_shows_the_lag() -> None:
    # Nodes in two worker processes, delta heartbeats and the ring over TCP: a crash from the
    # page goes to the worker hosting the node, and the ring (not an expiry) removes it.
    sc = msgspec.structs.replace(
        small_scenario(nodes=12, speed=10.0),
        heartbeat=msgspec.structs.replace(small_scenario().heartbeat, mode="delta"),
        transport=msgspec.structs.replace(small_scenario().transport, kind="tcp", workers=2),
    )
    async with served(sc, allow_control=True) as srv, srv.session() as s:
        base = srv.url + "api/"
        await wait_for(lambda: _registered(s, base, 12))
        status, body = await post(s, base + "control/nodes", {"action": "crash", "nodes": ["n-0-00009"]})
        assert status == 200 and body["nodes"] == ["n-0-00009"]

        async def lost() -> Any:
            return (await get(s, base + "events?kinds=node.lost"))["events"]

        (removed,) = await wait_for(lost)
        assert removed["address"] == "n-0-00009" and "reported by" in removed["reason"]
        c = await get(s, base + "cluster")
        assert c["nodes_lost"] == 1 and c["false_removals"] == 0
        # The page's crash is the page's: the scenario crashed nothing.
        assert c["injected"]["crashed"] == 1 and c["scenario_faults"] == {"crashed": 0, "paused": 0}
        lag = c["lag"]
        assert lag is not None and lag["threshold_s"] == pytest.approx(0.1) and not lag["overloaded"]
