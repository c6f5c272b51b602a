"""Live fault injection and run control from the status page (only with ``--allow-control``).

A crash is the node process dying: ``NodeManager.crash()`` if this build has it, otherwise
``stop()``, which sends nothing, so the RM learns of it only through its failure detector. A
paused node (a stalled process) keeps its state but nothing it sends reaches the RM until the
pause ends; then the held messages go out in order, as from a process that wakes up.
Every action is an event in the run's log.
"""

from __future__ import annotations

import random
from typing import Any

from emulator.web.state import Injected, LiveRun


class ControlError(ValueError):
    """A control request that cannot be carried out (bad target, run not started, ...)."""


class _HeldLink:
    """Wraps a node's link to the RM; while held, sends are queued instead of delivered."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.held: list[Any] = []

    def send(self, msg: Any) -> None:
        self.held.append(msg)

    def close(self) -> None:
        self.inner.close()

    @property
    def closed(self) -> bool:
        return bool(self.inner.closed)


class Controller:
    def __init__(self, live: LiveRun) -> None:
        self.live = live
        self._rng = random.Random(f"{live.scenario.run.seed}:control")

    # ---- the run ------------------------------------------------------------------------

    def _clock(self) -> Any:
        if self.live.clock is None or self.live.finished:
            raise ControlError("the run is not in progress")
        return self.live.clock

    def pause_run(self) -> bool:
        changed = bool(self._clock().pause())
        if changed:
            self.live.log("control.run_paused")
        return changed

    def resume_run(self) -> bool:
        changed = bool(self._clock().resume())
        if changed:
            self.live.log("control.run_resumed")
        return changed

    def set_speed(self, speed: float) -> float:
        if not 0 < speed <= 10_000:
            raise ControlError("speed must be in (0, 10000]")
        self._clock().set_speed(speed)
        self.live.log("control.speed_set", speed=speed)
        return speed

    # ---- nodes ----------------------------------------------------------------------------

    def select(self, nodes: list[str | int] | None = None, fraction: float | None = None,
               count: int | None = None) -> list[Any]:
        """Nodes by address or machine id, or a random fraction / count of the healthy ones."""
        out = self.live.outcome
        if out is None or self.live.finished:
            raise ControlError("the run is not in progress")
        untouched = [n for n in out.nodes if n.address not in self.live.injected
                     and n.state.value != "stopped"]
        if nodes:
            by_address = {n.address: n for n in out.nodes}
            by_id = {n.machine_id: n for n in out.nodes if n.machine_id > 0}
            chosen = []
            for key in nodes:
                node = by_address.get(str(key))
                if node is None and str(key).isdigit():
                    node = by_id.get(int(key))
                if node is None:
                    raise ControlError(f"no node {key!r} (give an address or a machine id)")
                hit = self.live.injected.get(node.address)
                if hit is not None:
                    raise ControlError(f"node {node.address} is already {hit.kind}")
                chosen.append(node)
            return chosen
        if fraction is not None:
            if not 0 < fraction <= 1:
                raise ControlError("fraction must be in (0, 1]")
            count = max(1, round(fraction * len(out.nodes)))
        if count is None or count < 1:
            raise ControlError("give `nodes`, `fraction` or `count`")
        return self._rng.sample(untouched, min(count, len(untouched)))

    def crash(self, targets: list[Any]) -> list[str]:
        now = self.live.now()
        for node in targets:
            crash = getattr(node, "crash", None)
            if callable(crash):
                crash()
            else:
                node.stop()
            self.live.injected[node.address] = Injected("crashed", now)
        names = [n.address for n in targets]
        self.live.log("control.crash", nodes=names[:50], count=len(names))
        return names

    def pause_nodes(self, targets: list[Any], duration_s: float) -> list[str]:
        if not 0 < duration_s <= 86_400:
            raise ControlError("duration_s must be in (0, 86400]")
        clock = self._clock()
        now = self.live.now()
        for node in targets:
            inner = getattr(node, "_link", None)
            if inner is None:
                raise ControlError(f"node {node.address} has no link to hold")
            held = _HeldLink(inner)
            node.attach(held)
            self.live.injected[node.address] = Injected("paused", now, now + duration_s)
            clock.call_later(duration_s, self._unpause, node, held)
        names = [n.address for n in targets]
        self.live.log("control.node_paused", nodes=names[:50], count=len(names), duration_s=duration_s)
        return names

    def _unpause(self, node: Any, held: _HeldLink) -> None:
        node.attach(held.inner)
        hit = self.live.injected.get(node.address)
        if hit is not None and hit.kind == "paused":
            del self.live.injected[node.address]
        self.live.log("control.node_resumed", node=node.address, held_messages=len(held.held))
        for msg in held.held:
            held.inner.send(msg)
