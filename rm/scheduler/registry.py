"""Scheduling policies by name (``scheduler.policy``): the built-ins and the plug-ins registered
under the entry-point group ``hbemu.policies`` (docs/extending.md), all loaded the same way.

A policy is a class implementing ``rm.scheduler.policy.RegisteredPolicy``: one constructor signature
``(root, cluster, config, clock, counters, params)`` and a ``Params`` msgspec struct decoded from
``[scheduler.params]``. The built-ins are listed here as well as in pyproject.toml so that a
checkout whose installed metadata is older than the entry points still runs them.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from importlib.metadata import EntryPoints
from types import MappingProxyType
from typing import Any, cast

import msgspec

from rm.plugins import PluginError, Registry, discover
from rm.ports import Clock
from rm.scheduler.config import SchedulerConfig
from rm.scheduler.policy import Policy, PolicyCounters, RegisteredPolicy
from rm.state.cluster import Cluster
from rm.state.operations import Pool

GROUP = "hbemu.policies"

BUILTIN_POLICIES: Mapping[str, str] = MappingProxyType({
    "drf": "rm.scheduler.policies.drf:DRFPolicy",
    "drfh": "rm.scheduler.policies.drfh:DRFHPolicy",
    "fifo": "rm.scheduler.policies.fifo:FIFOPolicy",
    "packing": "rm.scheduler.policies.packing:PackingPolicy",
    "tetris": "rm.scheduler.policies.tetris:TetrisPolicy",
})

# What the scheduling loop calls on every policy (rm/scheduler/loop.py, rm/shell/life.py).
_METHODS = ("candidates", "assign", "place", "on_submitted", "on_finished", "begin_fill")


class ParamsError(PluginError):
    """``[scheduler.params]`` does not fit the policy's ``Params``; ``path`` is the field's path."""

    def __init__(self, path: str, message: str) -> None:
        super().__init__(f"at `{path}`: {message}")
        self.path = path
        self.message = message


def policies(found: EntryPoints | None = None) -> Registry:
    """Every registered policy: the built-ins, then the entry points (``found``: a scan to reuse)."""
    return discover(GROUP, "scheduling policy", BUILTIN_POLICIES, found)


def load_policy(name: str, registry: Registry | None = None) -> type[RegisteredPolicy]:
    """The class registered as ``name``, checked to look like a ``Policy``."""
    registry = registry if registry is not None else policies()
    cls = registry.load(name)
    origin = registry.entry(name).origin
    if not isinstance(cls, type):
        raise PluginError(f"scheduling policy `{name}` ({origin}) is not a class: {cls!r}")
    params = getattr(cls, "Params", None)
    if not (isinstance(params, type) and issubclass(params, msgspec.Struct)):
        raise PluginError(f"scheduling policy `{name}` ({origin}): `{cls.__name__}.Params` must be a "
                          "msgspec.Struct subclass (rm.scheduler.policy.NoParams for none)")
    if not isinstance(getattr(cls, "chooses_nodes", None), bool):
        raise PluginError(f"scheduling policy `{name}` ({origin}): `{cls.__name__}.chooses_nodes` "
                          "must be True or False")
    missing = [m for m in _METHODS if not callable(getattr(cls, m, None))]
    if missing:
        raise PluginError(f"scheduling policy `{name}` ({origin}): `{cls.__name__}` lacks "
                          f"{', '.join(f'`{m}`' for m in missing)} (rm.scheduler.policy.PolicyBase has them)")
    return cast("type[RegisteredPolicy]", cls)


_AT = re.compile(r"^(?P<msg>.*?)(?: - at `\$(?P<path>[^`]*)`)?$", re.S)
_UNKNOWN = re.compile(r"^object contains unknown field `(.*)`$", re.S)


def decode_params(cls: type[RegisteredPolicy], raw: Mapping[str, Any], name: str = "") -> msgspec.Struct:
    """``[scheduler.params]`` as the policy's ``Params`` (unknown and mistyped fields refused)."""
    try:
        params: msgspec.Struct = msgspec.convert(dict(raw), cls.Params, strict=True)
    except msgspec.ValidationError as err:
        m = _AT.match(str(err))
        assert m is not None
        msg, path = m.group("msg"), "scheduler.params" + (m.group("path") or "")
        msg = msg[0].lower() + msg[1:] if msg else msg
        unknown = _UNKNOWN.match(msg)
        if unknown:  # msgspec names the table; the user looks for the key
            msg, path = "unknown field", f"{path}.{unknown.group(1)}"
        fields = ", ".join(f"`{f}`" for f in cls.Params.__struct_fields__) or "none"
        what = f"the parameters of policy `{name or cls.__name__}`: {fields}"
        raise ParamsError(path, f"{msg} ({what})") from None
    return params


def make_policy(
    config: SchedulerConfig, root: Pool, cluster: Cluster, clock: Clock, counters: PolicyCounters,
    registry: Registry | None = None,
) -> Policy:
    cls = load_policy(config.policy, registry)
    return cls(root, cluster, config, clock, counters, decode_params(cls, config.params, config.policy))
