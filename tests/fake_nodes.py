"""Fake nodes around a synchronous RM, for scheduler tests that need tasks to finish on cue."""

from __future__ import annotations

from rm.protocol import (
    EXIT_SUCCESS,
    ContainerStatus,
    ContainerUsage,
    Heartbeat,
    LaunchContainers,
    Register,
    Resources,
)
from rm.scheduler.config import SchedulerConfig
from rm.state.operations import OperationSpec
from rm.views.snapshot import OperationView
from tests.helpers import RecordingLink, node_view, sync_rm


class FakeNodes:
    """Fake nodes around a synchronous RM: they heartbeat full reports and finish tasks on demand."""

    def __init__(self, scheduler: SchedulerConfig, nodes: list[tuple[float, float]]) -> None:
        self.rm, self.clock = sync_rm(scheduler=scheduler)
        self.links: list[RecordingLink] = []
        self.hb_id: list[int] = []
        self.running: list[dict[int, int]] = []  # per node: container id -> op id
        for i, (cpu, ram) in enumerate(nodes):
            link = RecordingLink()
            self.rm.receive(link, Register(address=f"n{i}", resources=Resources(cpu, ram)))
            self.links.append(link)
            self.hb_id.append(0)
            self.running.append({})

    def submit(self, name: str, cpu: float, ram: float, tasks: int, pool: str = "p") -> None:
        if not self.rm.has_pool(pool):
            self.rm.add_pool(pool)
        self.rm.submit_operation(
            OperationSpec(name=name, pool=pool, demand=Resources(cpu, ram), durations=[1.0] * tasks)
        )

    def heartbeat(self, i: int, finished: int | None = None, usage: tuple[ContainerUsage, ...] = ()) -> int:
        """Node ``i`` reports (one container finished, optionally; ``usage``: measured usage of
        its containers); returns tasks launched."""
        link = self.links[i]
        seen = len(link.sent)
        statuses = [ContainerStatus(cid, "running") for cid in self.running[i] if cid != finished]
        if finished is not None:
            statuses.append(ContainerStatus(finished, "complete", EXIT_SUCCESS))
            del self.running[i][finished]
        self.rm.receive(
            link, Heartbeat(
                machine_id=i + 1, heartbeat_id=self.hb_id[i], healthy=True, statuses=tuple(statuses),
                full=True, usage=usage,
            ),
        )
        self.hb_id[i] += 1
        launched = 0
        op_of = {c.container_id: c.op_id for c in node_view(self.rm, i + 1).containers}
        for msg in link.sent[seen:]:
            if isinstance(msg, LaunchContainers):
                for c in msg.containers:
                    self.running[i][c.container_id] = op_of[c.container_id]
                    launched += 1
        return launched

    def ops(self) -> dict[str, OperationView]:
        return {op.name: op for op in self.rm.operations_view()}

    def utilisation(self) -> tuple[float, float]:
        s = self.rm.snapshot()
        return s.cpu_utilization, s.ram_utilization
