"""The status page's connection gate on a real server on 127.0.0.1: past the cap a newcomer is
closed at once and the connections already open are served; a connection that sends nothing is
closed at its first-byte deadline; one that asks at once is served as before."""

from __future__ import annotations

import asyncio

import pytest
from aiohttp import web

from emulator.web.app import start_server


async def hello(_: web.Request) -> web.Response:
    return web.Response(text="hello")


def app() -> web.Application:
    a = web.Application()
    a.router.add_get("/", hello)
    return a


Conn = tuple[asyncio.StreamReader, asyncio.StreamWriter]


async def get(port: int, reader_writer: Conn | None = None) -> bytes:
    reader, writer = reader_writer or await asyncio.open_connection("127.0.0.1", port)
    writer.write(b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
    await writer.drain()
    async with asyncio.timeout(5):
        body = await reader.read()
    writer.close()
    return body


async def closed_by_server(reader: asyncio.StreamReader, within_s: float) -> bool:
    try:
        async with asyncio.timeout(within_s):
            return await reader.read() == b""
    except TimeoutError:
        return False


@pytest.mark.asyncio
async def test_past_the_cap_a_newcomer_is_closed_and_the_open_ones_are_served() -> None:
    server = await start_server(app(), max_connections=4, first_byte_s=30.0)
    try:
        held = [await asyncio.open_connection("127.0.0.1", server.port) for _ in range(4)]
        await asyncio.sleep(0.1)
        reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
        assert await closed_by_server(reader, 2.0)  # the fifth: closed, never served
        writer.close()
        assert server.gate.counters.refused == 1
        assert b"hello" in await get(server.port, held[0])  # a held one asks: served
        await asyncio.sleep(0.1)
        assert b"hello" in await get(server.port)  # its slot is free again
        for _, w in held[1:]:
            w.close()
    finally:
        await server.close()


@pytest.mark.asyncio
async def test_a_silent_connection_is_closed_at_its_first_byte_deadline() -> None:
    server = await start_server(app(), first_byte_s=0.3)
    try:
        reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
        assert await closed_by_server(reader, 3.0)
        writer.close()
        assert server.gate.counters.silent == 1 and server.gate.counters.open == 0
        assert b"hello" in await get(server.port)  # asking at once: served as before
        assert server.gate.counters.silent == 1
    finally:
        await server.close()
