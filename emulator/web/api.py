"""JSON API under /api/: the only data source of the status page.

GET  /api/cluster | /api/nodes | /api/operations | /api/ring | /api/events | /api/timeseries
POST /api/control/run     {"action": "pause" | "resume" | "speed", "speed": 50}
POST /api/control/nodes   {"action": "crash" | "pause", "nodes": [...] | "fraction": f | "count": n,
                           "duration_s": s}
GET  /api/control/token   {"token": ...}: what control requests carry in ``X-Control-Token``
Control answers 403 unless the server was started with ``--allow-control``, and then only to
requests that pass ``guard`` (loopback or bound Host, same origin, JSON body, the token).
"""

from __future__ import annotations

from typing import Any

import msgspec
from aiohttp import web

from emulator.web import guard, ringview, views
from emulator.web.control import ControlError, Controller
from emulator.web.keys import ALLOWED_HOSTS, CONTROLLER, LIVE


def _json(doc: Any, status: int = 200) -> web.Response:
    return web.Response(body=msgspec.json.encode(doc), status=status, content_type="application/json")


def _error(status: int, message: str) -> web.Response:
    return _json({"error": message}, status)


class BadQuery(ValueError):
    """A query parameter of the wrong type: answered 400 with the message."""


@web.middleware
async def bad_query_middleware(request: web.Request, handler: Any) -> web.StreamResponse:
    try:
        return await handler(request)  # type: ignore[no-any-return]
    except BadQuery as err:
        return _error(400, str(err))


def _int(request: web.Request, name: str, default: int) -> int:
    raw = request.query.get(name)
    if raw is None or raw == "":
        return default
    try:
        return int(raw)
    except ValueError:
        raise BadQuery(f"query `{name}` must be an integer, got {raw!r}") from None


def _float(request: web.Request, name: str, default: float) -> float:
    raw = request.query.get(name)
    if raw is None or raw == "":
        return default
    try:
        return float(raw)
    except ValueError:
        raise BadQuery(f"query `{name}` must be a number, got {raw!r}") from None


async def get_cluster(request: web.Request) -> web.Response:
    return _json(views.cluster(request.app[LIVE]))


async def get_nodes(request: web.Request) -> web.Response:
    q = request.query
    doc = views.nodes(
        request.app[LIVE], q=q.get("q", ""), page=_int(request, "page", 1),
        per_page=_int(request, "per_page", 25), sort=q.get("sort", "machine_id"),
        desc=q.get("desc", "") in ("1", "true"), state=q.get("state", ""),
    )
    return _json(doc)


async def get_operations(request: web.Request) -> web.Response:
    return _json(views.operations(request.app[LIVE]))


async def get_ring(request: web.Request) -> web.Response:
    return _json(ringview.ring(request.app[LIVE]))


async def get_events(request: web.Request) -> web.Response:
    kinds = tuple(k for k in request.query.get("kinds", "").split(",") if k)
    doc = views.events(request.app[LIVE], since=_int(request, "since", 0),
                       limit=max(1, min(_int(request, "limit", 200), 5000)), kinds=kinds)
    return _json(doc)


async def get_timeseries(request: web.Request) -> web.Response:
    return _json(views.timeseries(request.app[LIVE], since_t=_float(request, "since", -1.0)))


class RunControl(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    action: str
    speed: float | None = None


class NodeControl(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    action: str
    nodes: list[str | int] | None = None
    fraction: float | None = None
    count: int | None = None
    duration_s: float = 30.0


async def _body(request: web.Request, kind: type[Any]) -> Any:
    try:
        return msgspec.json.decode(await request.read(), type=kind)
    except msgspec.DecodeError as err:  # ValidationError is a DecodeError
        raise ControlError(f"bad request body: {err}") from None


def _refused(request: web.Request, need_token: bool = True) -> web.Response | None:
    live = request.app[LIVE]
    if not live.allow_control:
        return _error(403, "control is off: start the server with --allow-control")
    why = guard.refusal(request, live.control_token, request.app[ALLOWED_HOSTS], need_token)
    if why.startswith("415 "):
        return _error(415, why[4:])
    return _error(403, why) if why else None


async def get_token(request: web.Request) -> web.Response:
    refused = _refused(request, need_token=False)
    if refused is not None:
        return refused
    return _json({"token": request.app[LIVE].control_token})


async def post_run(request: web.Request) -> web.Response:
    if (refused := _refused(request)) is not None:
        return refused
    ctl: Controller = request.app[CONTROLLER]
    try:
        body = await _body(request, RunControl)
        if body.action == "pause":
            changed = ctl.pause_run()
        elif body.action == "resume":
            changed = ctl.resume_run()
        elif body.action == "speed" and body.speed is not None:
            ctl.set_speed(body.speed)
            changed = True
        else:
            raise ControlError("action must be `pause`, `resume` or `speed` (with `speed`)")
    except ControlError as err:
        return _error(400, str(err))
    return _json({"ok": True, "changed": changed, "phase": request.app[LIVE].phase.value})


async def post_nodes(request: web.Request) -> web.Response:
    if (refused := _refused(request)) is not None:
        return refused
    ctl: Controller = request.app[CONTROLLER]
    try:
        body = await _body(request, NodeControl)
        targets = ctl.select(body.nodes, body.fraction, body.count)
        if body.action == "crash":
            names = ctl.crash(targets)
        elif body.action == "pause":
            names = ctl.pause_nodes(targets, body.duration_s)
        else:
            raise ControlError("action must be `crash` or `pause`")
    except ControlError as err:
        return _error(400, str(err))
    return _json({"ok": True, "action": body.action, "nodes": names})


def add_routes(app: web.Application) -> None:
    app.middlewares.append(bad_query_middleware)
    app.router.add_get("/api/cluster", get_cluster)
    app.router.add_get("/api/nodes", get_nodes)
    app.router.add_get("/api/operations", get_operations)
    app.router.add_get("/api/ring", get_ring)
    app.router.add_get("/api/events", get_events)
    app.router.add_get("/api/timeseries", get_timeseries)
    app.router.add_get("/api/control/token", get_token)
    app.router.add_post("/api/control/run", post_run)
    app.router.add_post("/api/control/nodes", post_nodes)
