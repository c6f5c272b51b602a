"""Typed application state of the status page's aiohttp app."""

from __future__ import annotations

import asyncio

from aiohttp import web
from prometheus_client import CollectorRegistry

from emulator.web.control import Controller
from emulator.web.guard import StreamSlots
from emulator.web.state import LiveRun

LIVE = web.AppKey("live", LiveRun)
CONTROLLER = web.AppKey("controller", Controller)
REGISTRY = web.AppKey("registry", CollectorRegistry)
# Set when the server shuts down, so long-lived push streams end at once.
STOPPING = web.AppKey("stopping", asyncio.Event)
PUSH_INTERVAL_S = web.AppKey("push_interval_s", float)
# Host names a control request may use besides loopback ones (``guard``).
ALLOWED_HOSTS = web.AppKey("allowed_hosts", frozenset)
STREAMS = web.AppKey("streams", StreamSlots)
