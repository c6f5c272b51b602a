"""Checks of the names a scenario picks from a registry (docs/extending.md): the scheduling policy
and its ``[scheduler.params]``, the heartbeat mode, the failure detector; and the combinations
that validate field by field but would silently not run what they name."""

from __future__ import annotations

from collections.abc import Mapping
from importlib.metadata import EntryPoints

from emulator.scenario.schema import Scenario
from nodemanager.config import BUILTIN_HEARTBEATS
from ringmon.config import BUILTIN_DETECTORS
from rm import ParamsError, PluginError, decode_params, discover, installed, load_policy, policies

# A Problem is (field path, message); checks.py wraps it.
Found = tuple[str, str]


def problem(sc: Scenario) -> Found | None:
    """The first unusable name, or combination, of ``sc``."""
    found = installed()  # one scan of the installed metadata for the three registries
    return policy_problem(sc, found) or mode_problem(sc, found) or detector_problem(sc, found)


def policy_problem(sc: Scenario, found: EntryPoints | None = None) -> Found | None:
    scheduler = sc.scheduler
    try:
        cls = load_policy(scheduler.policy, policies(found))
        decode_params(cls, scheduler.params, scheduler.policy)
    except ParamsError as err:
        return err.path, err.message
    except PluginError as err:
        return "scheduler.policy", str(err)
    placement = scheduler.placement.policy
    if placement != "default" and scheduler.policy != "drf":
        # rm/borg/layer.py: a placement policy replaces the configured one altogether.
        return "scheduler.policy", (
            f"`{scheduler.policy}` would never run: `scheduler.placement.policy = \"{placement}\"` chooses "
            "the nodes and orders the operations itself (tier, then dominant share, as `drf`); expected "
            '`scheduler.policy = "drf"` (the default) with a placement policy, or '
            '`scheduler.placement.policy = "default"` to run this one'
        )
    capped = [p.name for p in sc.workload.pools if p.max_cpu is not None or p.max_ram_gib is not None]
    if placement != "default" and capped:
        return "workload.pools", (
            f"pool maximums ({', '.join(capped[:5])}) would not apply: `scheduler.placement.policy = "
            f"\"{placement}\"` orders the operations itself, without pools; expected no `max_cpu` / "
            "`max_ram_gib` with a placement policy, or `scheduler.placement.policy = \"default\"`"
        )
    if scheduler.tiers.enabled and cls.chooses_nodes:
        # rm/borg/layer.py: tiers wrap a policy that orders operations, not one that pairs
        # operations with nodes itself; the tier order would silently not apply.
        return "scheduler.tiers.enabled", (
            f"tiers would not order `{scheduler.policy}`: it chooses which operation starts on which "
            "node itself, so higher tiers would not go first; expected a policy that orders "
            "operations (such as `drf` or `fifo`) with tiers, or `scheduler.tiers.enabled = false`"
        )
    return None


def _builtin_only(
    path: str, what: str, name: str, group: str, builtins: Mapping[str, str], found: EntryPoints | None,
) -> Found | None:
    """A name of a registry whose implementations are built in: a plug-in's name is known (and
    said so) but cannot run yet."""
    registry = discover(group, what, builtins, found)
    try:
        entry = registry.entry(name)
    except PluginError as err:
        return path, str(err)
    if entry.origin != "built-in":
        names = ", ".join(f"`{n}`" for n in sorted(builtins))
        return path, (
            f"{what} `{name}` is registered by {entry.origin} ({entry.value}), but {what}s cannot be "
            f"plugged in yet: this version implements only {names} (docs/extending.md, \"Limits\")"
        )
    return None


def mode_problem(sc: Scenario, found: EntryPoints | None = None) -> Found | None:
    return _builtin_only("heartbeat.mode", "heartbeat mode", sc.heartbeat.mode, "hbemu.heartbeats",
                         BUILTIN_HEARTBEATS, found)


def detector_problem(sc: Scenario, found: EntryPoints | None = None) -> Found | None:
    return _builtin_only("ring.detector", "failure detector", sc.ring.detector, "hbemu.detectors",
                         BUILTIN_DETECTORS, found)
