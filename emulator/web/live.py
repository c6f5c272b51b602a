"""The push channel: server-sent events at /api/stream, one ``tick`` per push interval.

Each tick carries the documents of /api/cluster, /api/operations and /api/ring plus what is new
in /api/timeseries and /api/events since the previous tick to this client, so the page never
reloads. The cadence is wall time (a screen refresh rate), not emulated time: the page stays live
while the run is paused.
"""

from __future__ import annotations

import asyncio
import contextlib

import msgspec
from aiohttp import web

from emulator.web import ringview, views
from emulator.web.keys import LIVE, PUSH_INTERVAL_S, STOPPING, STREAMS


async def stream(request: web.Request) -> web.StreamResponse:
    slots = request.app[STREAMS]
    if slots.active >= slots.limit:
        slots.refused += 1
        return web.json_response({"error": f"too many stream clients (at most {slots.limit})"}, status=503)
    slots.active += 1
    try:
        return await _stream(request)
    finally:
        slots.active -= 1


async def _stream(request: web.Request) -> web.StreamResponse:
    live = request.app[LIVE]
    stopping = request.app[STOPPING]
    interval = request.app[PUSH_INTERVAL_S]
    resp = web.StreamResponse(headers={
        "Content-Type": "text/event-stream",
        "Cache-Control": "no-cache",
        "X-Accel-Buffering": "no",
    })
    await resp.prepare(request)
    last_t = -1.0
    last_seq = 0
    tick = 0
    with contextlib.suppress(ConnectionResetError):
        while not stopping.is_set():
            series = views.timeseries(live, since_t=last_t)
            ts = series["series"]["t_s"]
            if len(ts) > 1:  # the last point again next time: its m_i and s_i settle at the next sample
                last_t = ts[-2]
            ev = views.events(live, since=last_seq, limit=500)
            last_seq = ev["last_seq"]
            doc = {
                "tick": tick,
                "cluster": views.cluster(live),
                "operations": views.operations(live),
                "ring": ringview.ring(live),
                "timeseries": series,
                "events": ev,
            }
            await resp.write(b"event: tick\ndata: " + msgspec.json.encode(doc) + b"\n\n")
            tick += 1
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stopping.wait(), interval)
    return resp


def add_routes(app: web.Application) -> None:
    app.router.add_get("/api/stream", stream)
