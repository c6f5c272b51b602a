"""The workload's clients: they submit the scenario's operations to the RM at their times, and
looping users resubmit when their operation finishes."""

from __future__ import annotations

import random

from emulator.scenario.schema import OperationConfig, WorkloadConfig
from emulator.time.clock import LoopClock
from rm.manager import ResourceManager, RMUnavailable
from rm.observer import OperationEvent, RMObserver
from rm.operations import OperationSpec
from rm.protocol import Resources


class WorkloadDriver(RMObserver):
    def __init__(self, config: WorkloadConfig, rm: ResourceManager, clock: LoopClock, seed: int) -> None:
        self._config = config
        self._rm = rm
        self._clock = clock
        self._seed = seed
        self._by_group: dict[str, OperationConfig] = {o.name: o for o in config.operations}
        self._instances: dict[str, int] = {}
        self._stopped = False
        self._held: list[OperationSpec] = []
        rm.observe(self)

    def install_pools(self) -> None:
        rm = self._rm
        declared = {p.name for p in self._config.pools}
        for p in self._config.pools:
            if p.parent != "root" and not rm.has_pool(p.parent) and p.parent not in declared:
                rm.add_pool(p.parent)
        pending = list(self._config.pools)
        while pending:  # parents before children, whatever the file order
            progress = [p for p in pending if rm.has_pool(p.parent)]
            for p in progress:
                rm.add_pool(p.name, p.weight, Resources(p.min_cpu, p.min_ram_gib), p.parent)
            pending = [p for p in pending if p not in progress]
            if not progress:
                raise ValueError(f"pool cycle among {[p.name for p in pending]}")
        for op in self._config.operations:
            if not rm.has_pool(op.pool):
                rm.add_pool(op.pool)

    def start(self) -> None:
        """Schedule every submission; call once the RM is running."""
        for op in self._config.operations:
            for k in range(op.repeat):
                self._clock.call_later(op.submit_at_s + k * op.repeat_every_s, self._submit, op)

    def stop(self) -> None:
        self._stopped = True

    def _submit(self, cfg: OperationConfig) -> None:
        if self._stopped:
            return
        k = self._instances.get(cfg.name, 0)
        self._instances[cfg.name] = k + 1
        rng = random.Random(f"{self._seed}:{cfg.name}:{k}")
        low = self._config.min_task_seconds
        durations = [
            max(low, rng.gauss(cfg.seconds_mean, cfg.seconds_deviation))
            if cfg.seconds_deviation > 0
            else cfg.seconds_mean
            for _ in range(cfg.task_count)
        ]
        name = cfg.name if (cfg.repeat == 1 and not cfg.loop) else f"{cfg.name}#{k}"
        self._send(
            OperationSpec(
                name=name,
                pool=cfg.pool,
                demand=Resources(cfg.cpu, cfg.ram_gib),
                durations=durations,
                weight=cfg.weight,
                group=cfg.name,
            )
        )

    def _send(self, spec: OperationSpec) -> None:
        try:
            self._rm.submit_operation(spec)
        except RMUnavailable:
            # The RM is restarting: the client holds the submission until it is back.
            self._held.append(spec)

    def rm_recovered(self) -> None:
        held, self._held = self._held, []
        for spec in held:
            self._send(spec)

    def operation_finished(self, ev: OperationEvent) -> None:
        cfg = self._by_group.get(ev.group)
        if cfg is not None and cfg.loop and not self._stopped:
            self._submit(cfg)
