"""Fake nodes around a synchronous RM, for scheduler tests that need tasks to finish on cue."""

from __future__ import annotations

from rm.operations import OperationSpec
from rm.protocol import EXIT_SUCCESS, ContainerStatus, Heartbeat, LaunchContainers, Register
from rm.resources import Resources
from rm.scheduler.config import SchedulerConfig
from tests.helpers import RecordingLink, sync_rm


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
        if pool not in self.rm.pools:
            self.rm.add_pool(pool)
        self.rm.submit_operation(
            OperationSpec(name=name, pool=pool, demand=Resources(cpu, ram), durations=[1.0] * tasks)
        )

    def heartbeat(self, i: int, finished: int | None = None) -> int:
        """Node ``i`` reports (one container finished, optionally); returns tasks launched."""
        link = self.links[i]
        seen = len(link.sent)
        statuses = [ContainerStatus(cid, "running") for cid in self.running[i] if cid != finished]
        if finished is not None:
            statuses.append(ContainerStatus(finished, "complete", EXIT_SUCCESS))
            del self.running[i][finished]
        self.rm.receive(
            link, Heartbeat(
                machine_id=i + 1, heartbeat_id=self.hb_id[i], healthy=True, statuses=tuple(statuses),
                full=True,
            ),
        )
        self.hb_id[i] += 1
        launched = 0
        for msg in link.sent[seen:]:
            if isinstance(msg, LaunchContainers):
                for c in msg.containers:
                    alloc = self.rm.cluster.nodes[i + 1].containers[c.container_id]
                    self.running[i][c.container_id] = alloc.op.id
                    launched += 1
        return launched

    def ops(self) -> dict[str, object]:
        return {op.name: op for op in self.rm.operations.values()}

    def utilisation(self) -> tuple[float, float]:
        c = self.rm.cluster
        return c.used_cpu / c.cap_cpu, c.used_ram / c.cap_ram
