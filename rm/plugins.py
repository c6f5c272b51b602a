"""Named implementations found through entry points (docs/extending.md).

A group (``hbemu.policies``, ``hbemu.detectors``, ``hbemu.heartbeats``) maps names to
``module:attribute`` references. The built-in table comes first and always applies, so a checkout
whose installed metadata predates an entry point (an editable install is refreshed only by
``pip install -e .``) still knows every built-in; installed entry points add to it. A plug-in
cannot replace a built-in name; two plug-ins claiming one name make that name unusable (which
one would run would depend on install order).

Nothing here is cached: the registry is built when asked for (a scenario's validation, an RM's
construction), so a package installed later, or a test's temporary ``sys.path`` entry, is seen.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from importlib.metadata import EntryPoints, entry_points
from typing import Any


class PluginError(ValueError):
    """A name that cannot be used: unknown, claimed twice, or not loadable. The message says why."""


@dataclass(frozen=True)
class Entry:
    name: str
    value: str  # "module:attribute"
    origin: str  # "built-in" or the distribution that declared it


@dataclass(frozen=True)
class Registry:
    """The names of one group, each with where it comes from."""

    group: str
    what: str  # e.g. "scheduling policy", for messages
    entries: Mapping[str, Entry]
    # Names two plug-ins declared with different values: name -> the claims.
    conflicts: Mapping[str, tuple[Entry, ...]] = field(default_factory=dict)

    def names(self) -> list[str]:
        return sorted(self.entries)

    def listing(self) -> str:
        return ", ".join(f"`{n}`" for n in self.names())

    def entry(self, name: str) -> Entry:
        if name in self.conflicts:
            claims = "; ".join(f"{e.origin} ({e.value})" for e in self.conflicts[name])
            raise PluginError(
                f"{self.what} `{name}` is declared by more than one installed package ({claims}); "
                f"expected one (uninstall one of them)"
            )
        found = self.entries.get(name)
        if found is None:
            raise PluginError(
                f"unknown {self.what} `{name}`; expected one of the registered ones: {self.listing()} "
                f"(plug-ins register under the entry-point group `{self.group}`)"
            )
        return found

    def load(self, name: str) -> Any:
        """The object ``name`` refers to (its module imported)."""
        e = self.entry(name)
        module, _, attr = e.value.partition(":")
        try:
            obj: Any = importlib.import_module(module)
            for part in attr.split(".") if attr else ():
                obj = getattr(obj, part)
        except (ImportError, AttributeError) as err:
            raise PluginError(f"{self.what} `{name}` ({e.origin}) cannot be loaded from "
                              f"`{e.value}`: {err}") from None
        return obj


def installed() -> EntryPoints:
    """Every installed entry point: one scan of every distribution's metadata on sys.path (about
    10 ms with 70 packages), to share between the registries one validation reads."""
    everything = entry_points()
    if isinstance(everything, EntryPoints):  # Python 3.12+
        return everything
    # Python 3.11: a mapping by group (its dict methods are deprecated; `select` is not).
    return EntryPoints(ep for g in sorted(everything.groups) for ep in everything.select(group=g))


def discover(
    group: str, what: str, builtins: Mapping[str, str], found: EntryPoints | None = None,
) -> Registry:
    """The built-ins plus every entry point of ``group`` (in ``found``, default: a fresh scan)."""
    entries = {name: Entry(name, value, "built-in") for name, value in builtins.items()}
    claims: dict[str, list[Entry]] = {}
    for ep in (found if found is not None else installed()).select(group=group):
        dist = ep.dist.name if ep.dist is not None else "an unnamed distribution"
        claims.setdefault(ep.name, []).append(Entry(ep.name, ep.value, dist))
    conflicts: dict[str, tuple[Entry, ...]] = {}
    for name, claimed in sorted(claims.items()):
        if name in builtins:
            continue  # hbemu's own metadata, or a plug-in trying to replace a built-in: the built-in wins
        if len({e.value for e in claimed}) > 1:
            conflicts[name] = tuple(claimed)
        else:
            entries[name] = claimed[0]
    return Registry(group, what, entries, conflicts)
