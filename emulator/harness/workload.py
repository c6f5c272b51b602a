"""Submitting the scenario's operations to the RM at their times; looping users resubmit."""

from __future__ import annotations

import random
from typing import Any

from emulator.scenario.schema import OperationConfig, WorkloadConfig
from emulator.time.clock import LoopClock
from rm.manager import ResourceManager, RMUnavailable
from rm.operations import Operation, OperationSpec
from rm.resources import Resources


class WorkloadDriver:
    def __init__(
        self, config: WorkloadConfig, rm: ResourceManager, clock: LoopClock, seed: int, log: Any
    ) -> None:
        self._config = config
        self._rm = rm
        self._clock = clock
        self._seed = seed
        self._log = log
        self._by_group: dict[str, OperationConfig] = {o.name: o for o in config.operations}
        self._instances: dict[str, int] = {}
        self._stopped = False
        self._held: list[OperationSpec] = []
        rm.operation_finished.append(self._on_finished)
        rm.recovered.append(self._on_recovered)

    def install_pools(self) -> None:
        declared = {p.name for p in self._config.pools}
        for p in self._config.pools:
            if p.parent != "root" and p.parent not in self._rm.pools and p.parent not in declared:
                self._rm.add_pool(p.parent)
        pending = list(self._config.pools)
        while pending:  # parents before children, whatever the file order
            progress = [p for p in pending if p.parent in self._rm.pools]
            for p in progress:
                self._rm.add_pool(p.name, p.weight, Resources(p.min_cpu, p.min_ram_gib), p.parent)
            pending = [p for p in pending if p not in progress]
            if not progress:
                raise ValueError(f"pool cycle among {[p.name for p in pending]}")
        for op in self._config.operations:
            if op.pool not in self._rm.pools:
                self._rm.add_pool(op.pool)

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
            for _ in range(cfg.job_count)
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

    def _on_recovered(self) -> None:
        held, self._held = self._held, []
        for spec in held:
            self._send(spec)

    def _on_finished(self, op: Operation) -> None:
        cfg = self._by_group.get(op.group)
        if cfg is not None and cfg.loop and not self._stopped:
            self._submit(cfg)
