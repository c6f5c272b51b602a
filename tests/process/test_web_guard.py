"""The control API against other web pages, on a real server on 127.0.0.1:0 with
``--allow-control``: a cross-origin "simple" POST (text/plain), a DNS-rebinding Host, a foreign
Origin and a missing token are all refused and leave the run alone; the page's own way (token
from /api/control/token, JSON body) works; stream clients are capped."""

from __future__ import annotations

import asyncio
from typing import Any

import aiohttp
import msgspec
import pytest

from emulator.web.guard import MAX_STREAMS, TOKEN_HEADER, host_name
from tests.webrun import Served, served, small_scenario

PAUSE = msgspec.json.encode({"action": "pause"})


async def attempt(srv: Served, headers: dict[str, str], body: bytes = PAUSE) -> tuple[int, Any]:
    async with aiohttp.ClientSession() as s, s.post(srv.url + "api/control/run", data=body,
                                                    headers=headers) as resp:
        return resp.status, await resp.json()


async def phase(srv: Served) -> str:
    async with aiohttp.ClientSession() as s, s.get(srv.url + "api/cluster") as resp:
        return str((await resp.json())["phase"])


@pytest.mark.asyncio
async def test_other_pages_cannot_control_the_run() -> None:
    async with served(small_scenario(), allow_control=True) as srv:
        token = srv.live.control_token
        assert len(token) >= 32
        port = srv.url.rstrip("/").rpartition(":")[2]
        json = {"Content-Type": "application/json"}
        cases = [
            # a cross-origin form or fetch without preflight: text/plain, token unknown to it
            ({"Content-Type": "text/plain", "Origin": "http://evil.example"}, 403),
            # the same, even if it had the token: not JSON
            ({"Content-Type": "text/plain", TOKEN_HEADER: token}, 415),
            # DNS rebinding: same-origin to the browser, but the Host is the attacker's name
            ({**json, "Host": f"evil.example:{port}", TOKEN_HEADER: token}, 403),
            ({**json, "Origin": "http://evil.example", TOKEN_HEADER: token}, 403),
            (json, 403),  # no token
            ({**json, TOKEN_HEADER: "x" * len(token)}, 403),
        ]
        for headers, status in cases:
            got, body = await attempt(srv, headers)
            assert got == status, (headers, body)
            assert token not in str(body)
        assert await phase(srv) == "running"  # nothing above touched the run

        # The page's own way: fetch the token (same origin), then a JSON POST carrying it.
        async with aiohttp.ClientSession() as s:
            async with s.get(srv.url + "api/control/token",
                             headers={"Host": f"evil.example:{port}"}) as resp:
                assert resp.status == 403  # a rebinding page cannot read it either
            async with s.get(srv.url + "api/control/token", headers={"Origin": srv.url.rstrip("/")}) as resp:
                assert resp.status == 200 and (await resp.json())["token"] == token
        got, body = await attempt(srv, {**json, TOKEN_HEADER: token, "Origin": srv.url.rstrip("/")})
        assert got == 200 and body["phase"] == "paused", body


@pytest.mark.asyncio
async def test_a_configured_host_name_may_control() -> None:
    async with served(small_scenario(), allow_control=True, allowed_hosts=frozenset({"Emu.Example"})) as srv:
        port = srv.url.rstrip("/").rpartition(":")[2]
        headers = {"Content-Type": "application/json", TOKEN_HEADER: srv.live.control_token}
        got, body = await attempt(srv, {**headers, "Host": f"other.example:{port}"})
        assert got == 403, body
        got, body = await attempt(srv, {**headers, "Host": f"emu.example:{port}"})
        assert got == 200 and body["phase"] == "paused", body


@pytest.mark.asyncio
async def test_stream_clients_are_capped() -> None:
    async with served(small_scenario(), push_interval_s=1.0) as srv, aiohttp.ClientSession() as s:
        streams = [await s.get(srv.url + "api/stream") for _ in range(MAX_STREAMS)]
        try:
            assert all(r.status == 200 for r in streams)
            async with s.get(srv.url + "api/stream") as extra:
                assert extra.status == 503
            streams.pop().close()
            await asyncio.sleep(2.5)  # the server notices at its next push (every 1 s)
            async with s.get(srv.url + "api/stream") as again:  # a slot came free
                assert again.status == 200
        finally:
            for r in streams:
                r.close()


def test_host_name() -> None:
    assert host_name("127.0.0.1:8080") == "127.0.0.1"
    assert host_name("[::1]:8080") == "::1"
    assert host_name("LocalHost") == "localhost"
    assert host_name("::1") == "::1"
