"""Live fault injection and run control from the status page (only with ``--allow-control``).

Node faults go through the run's fault injector, as the scenario's own faults do, so they work
wherever the nodes are hosted: a crash is the node process dying (the RM learns of it only
through its failure detector); a pause stalls the node's process (its event loop handles
nothing until the pause ends, then everything it held, in order). Every action is an event in
the run's log.
"""

from __future__ import annotations

import random

from emulator.time.pacing import PacedClock
from emulator.web.state import Attached, Injected, LiveRun


class ControlError(ValueError):
    """A control request that cannot be carried out (bad target, run not started, ...)."""


class Controller:
    def __init__(self, live: LiveRun) -> None:
        self.live = live
        self._rng = random.Random(f"{live.scenario.run.seed}:control")

    # ---- the run ------------------------------------------------------------------------

    def _clock(self) -> PacedClock:
        if self.live.run is None or self.live.finished:
            raise ControlError("the run is not in progress")
        if self.live.clock is None:
            raise ControlError("this run cannot be paused or re-paced: its nodes run in other processes "
                               "on their own clocks")
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

    def _run(self) -> Attached:
        run = self.live.run
        if run is None or self.live.finished:
            raise ControlError("the run is not in progress")
        return run

    def select(self, nodes: list[str | int] | None = None, fraction: float | None = None,
               count: int | None = None) -> list[str]:
        """Nodes by address or machine id, or a random fraction / count of the untouched ones."""
        run = self._run()
        addresses = run.side.hosting.addresses()
        down = run.side.faults.fates.down
        untouched = [a for a in addresses if a not in self.live.injected and a not in down]
        if nodes:
            known = set(addresses)
            by_id = {mid: a for a, mid in run.side.hosting.machine_ids().items()}
            chosen = []
            for key in nodes:
                address = str(key) if str(key) in known else None
                if address is None and str(key).isdigit():
                    address = by_id.get(int(key))
                if address is None:
                    raise ControlError(f"no node {key!r} (give an address or a machine id)")
                hit = self.live.injected.get(address)
                if hit is not None:
                    raise ControlError(f"node {address} is already {hit.kind}")
                chosen.append(address)
            return chosen
        if fraction is not None:
            if not 0 < fraction <= 1:
                raise ControlError("fraction must be in (0, 1]")
            count = max(1, round(fraction * len(addresses)))
        if count is None or count < 1:
            raise ControlError("give `nodes`, `fraction` or `count`")
        return self._rng.sample(untouched, min(count, len(untouched)))

    def crash(self, targets: list[str]) -> list[str]:
        run = self._run()
        now = self.live.now()
        names = run.side.faults.crash(targets, source="page")
        for address in names:
            self.live.injected[address] = Injected("crashed", now, source="page")
        self.live.log("control.crash", nodes=names[:50], count=len(names))
        return names

    def pause_nodes(self, targets: list[str], duration_s: float) -> list[str]:
        if not 0 < duration_s <= 86_400:
            raise ControlError("duration_s must be in (0, 86400]")
        run = self._run()
        clock = self._clock()
        now = self.live.now()
        run.side.faults.pause(targets, [duration_s] * len(targets))
        for address in targets:
            self.live.injected[address] = Injected("paused", now, now + duration_s, source="page")
        clock.call_later(duration_s, self._unpaused, targets)
        self.live.log("control.node_paused", nodes=targets[:50], count=len(targets), duration_s=duration_s)
        return targets

    def _unpaused(self, targets: list[str]) -> None:
        for address in targets:
            hit = self.live.injected.get(address)
            if hit is not None and hit.kind == "paused":
                del self.live.injected[address]
        self.live.log("control.node_resumed", nodes=targets[:50], count=len(targets))
