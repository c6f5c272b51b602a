"""Who may use the control API (``--allow-control``), and how many may stream.

A browser lets any web page send a "simple" cross-origin POST (``text/plain`` body, no custom
header) to 127.0.0.1, and a page whose name is re-pointed to 127.0.0.1 (DNS rebinding) is even
same-origin. So a control request must:

- name a loopback ``Host`` or the one the server was bound to (``allowed_hosts``): a rebinding page
  sends its own name;
- if it carries an ``Origin``, have it match the ``Host`` (same origin);
- have a JSON body (``Content-Type: application/json``; 415 otherwise): a cross-origin page cannot
  send that without a CORS preflight, which this server never grants;
- carry the run's control token (``X-Control-Token``), which the page fetches from
  ``/api/control/token`` (same rules, minus the token: a cross-origin page cannot read the answer)
  and which is printed on the terminal for scripts.

The push stream serves at most ``MAX_STREAMS`` clients at once (503 past that).
"""

from __future__ import annotations

import hmac
import ipaddress
from urllib.parse import urlsplit

from aiohttp import web

TOKEN_HEADER = "X-Control-Token"
MAX_STREAMS = 32
LOOPBACK_NAMES = frozenset({"localhost", "localhost.", "127.0.0.1", "::1"})


class StreamSlots:
    """Push-stream clients being served, at most ``limit``."""

    def __init__(self, limit: int = MAX_STREAMS) -> None:
        self.limit = limit
        self.active = 0
        self.refused = 0


def host_name(host_header: str) -> str:
    """``Host`` without its port, lower case, IPv6 without brackets."""
    if host_header.startswith("["):
        return host_header[1:].partition("]")[0].lower()
    return host_header.rpartition(":")[0].lower() if host_header.count(":") == 1 else host_header.lower()


def _is_loopback(name: str) -> bool:
    if name in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def allowed_hosts_for(bind_host: str) -> frozenset[str]:
    """The names a control request may use: loopback, and the bound address if it is one."""
    wildcard = bind_host in ("", "0.0.0.0", "::")
    return frozenset() if wildcard else frozenset({bind_host.lower()})


def refusal(request: web.Request, token: str, allowed: frozenset[str], need_token: bool = True) -> str:
    """Why this control request is refused (empty: it is not); the status is 403 unless the
    reason starts with "415"."""
    name = host_name(request.host)
    if not (_is_loopback(name) or name in allowed):
        return f"Host {request.host!r} is not this server's (give the address it listens on)"
    origin = request.headers.get("Origin")
    if origin is not None and urlsplit(origin).netloc.lower() != request.host.lower():
        return "cross-origin control requests are refused"
    if request.method == "POST" and request.content_type != "application/json":
        return "415 control requests take a JSON body (Content-Type: application/json)"
    if need_token and not hmac.compare_digest(request.headers.get(TOKEN_HEADER, "").encode(), token.encode()):
        return f"missing or wrong {TOKEN_HEADER} (the page fetches it; it is printed on the terminal)"
    return ""
