"""The status page's aiohttp application and its server lifecycle (AppRunner, served through a
``ConnectionGate``: a connection cap and a first-byte deadline)."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from pathlib import Path

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from emulator.results.palette import as_js
from emulator.web import api, live
from emulator.web.connections import FIRST_BYTE_S, MAX_CONNECTIONS, ConnectionGate
from emulator.web.control import Controller
from emulator.web.guard import StreamSlots
from emulator.web.keys import ALLOWED_HOSTS, CONTROLLER, LIVE, PUSH_INTERVAL_S, REGISTRY, STOPPING, STREAMS
from emulator.web.prom import make_registry
from emulator.web.state import LiveRun

STATIC = Path(__file__).parent / "static"


async def index(_: web.Request) -> web.FileResponse:
    return web.FileResponse(STATIC / "index.html", headers={"Cache-Control": "no-cache"})


async def palette(_: web.Request) -> web.Response:
    return web.Response(text=as_js(), content_type="application/javascript",
                        headers={"Cache-Control": "no-cache"})


async def metrics(request: web.Request) -> web.Response:
    body = generate_latest(request.app[REGISTRY])
    return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_LATEST})


async def _stop_streams(app: web.Application) -> None:
    app[STOPPING].set()


def make_app(run: LiveRun, push_interval_s: float = 1.0,
             allowed_hosts: frozenset[str] = frozenset()) -> web.Application:
    """``allowed_hosts``: ``Host`` names control requests may use besides loopback (``guard``)."""
    app = web.Application()
    app[LIVE] = run
    app[ALLOWED_HOSTS] = allowed_hosts
    app[STREAMS] = StreamSlots()
    app[CONTROLLER] = Controller(run)
    app[REGISTRY] = make_registry(run)
    app[STOPPING] = asyncio.Event()
    app[PUSH_INTERVAL_S] = push_interval_s
    app.router.add_get("/", index)
    app.router.add_get("/metrics", metrics)
    app.router.add_get("/palette.js", palette)
    app.router.add_static("/static/", STATIC)
    api.add_routes(app)
    live.add_routes(app)
    app.on_shutdown.append(_stop_streams)
    return app


def parse_bind(text: str, default_host: str = "127.0.0.1") -> tuple[str, int]:
    """``PORT``, ``HOST:PORT`` or ``[V6]:PORT`` -> (host, port)."""
    host, sep, port = text.rpartition(":")
    if not sep:
        host, port = default_host, text
    host = host.strip("[]") or default_host
    if not port.isdigit() or not 0 <= int(port) <= 65535:
        raise ValueError(f"--serve expects [HOST:]PORT with PORT in 0..65535, got {text!r}")
    return host, int(port)


@dataclass
class Server:
    runner: web.AppRunner
    host: str
    port: int
    listener: asyncio.Server
    gate: ConnectionGate

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}/"

    async def close(self) -> None:
        self.listener.close()
        await self.runner.cleanup()  # closes aiohttp's connections too
        async with asyncio.timeout(5):
            await self.listener.wait_closed()


async def start_server(app: web.Application, host: str = "127.0.0.1", port: int = 0,
                       max_connections: int = MAX_CONNECTIONS, first_byte_s: float = FIRST_BYTE_S) -> Server:
    """Serve ``app``; port 0 picks a free port (see ``Server.port``); at most ``max_connections``
    at once, each closed if it sends nothing within ``first_byte_s`` (``connections``)."""
    runner = web.AppRunner(app, access_log=None, shutdown_timeout=2.0)
    await runner.setup()
    factory = runner.server
    assert factory is not None  # set up above
    gate = ConnectionGate(factory, max_connections, first_byte_s)
    try:
        listener = await asyncio.get_running_loop().create_server(gate, host, port)
    except OSError:
        await runner.cleanup()
        raise
    bound = int(listener.sockets[0].getsockname()[1]) if listener.sockets else port
    return Server(runner, host, bound, listener, gate)
