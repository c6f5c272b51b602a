"""How much memory a scenario needs, estimated before anything is built, and how much this machine
has: ``emulator validate`` and ``run`` refuse what cannot fit instead of swapping or being killed.

The constants are peak-RSS growth per unit measured with ``python -m emulator.models.bench.memcal``
(virtual time, in memory, Python 3.11, x86-64; see that module for what each includes), rounded
up by about a quarter for what the calibration runs leave out (events, time series, fragmentation).
The estimate is an upper bound: every task submitted before the end pending at once, every slot
a container.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from pathlib import Path

from emulator.scenario.schema import OperationConfig, Scenario, largest

# memcal on the 2-core development machine (2 000 vs 8 000 nodes, 200 000 vs 800 000 tasks), two
# runs after the containers' shared completion heap (issue 18): 4,674-4,693 B per node (periodic),
# 9,376 (delta, with the ring: a monitor, its watches and ticks), 113 per pending task, ~630 per
# running container over its task (was ~900 with a timer each), 36.2 MB per interpreter.
NODE_PERIODIC_BYTES = 5_900
NODE_DELTA_BYTES = 11_700
TASK_BYTES = 150  # its duration in the submission, its Task in the queue
CONTAINER_BYTES = 800  # allocation, ledger entry, place in the completion heap and in heartbeats
PROCESS_BYTES = 44 << 20  # the RM's interpreter, or one TCP worker's


@dataclass(frozen=True)
class Footprint:
    nodes: int
    node_bytes: int
    tasks: int
    containers: int
    processes: int
    path: str  # the scenario field that accounts for most of it

    @property
    def total(self) -> int:
        return (self.nodes * self.node_bytes + self.tasks * TASK_BYTES + self.containers * CONTAINER_BYTES
                + self.processes * PROCESS_BYTES)

    def explain(self) -> str:
        return (
            f"{self.nodes:,} nodes × {self.node_bytes / 1024:.1f} KiB + {self.tasks:,} tasks × "
            f"{TASK_BYTES} B + {self.containers:,} running containers × {CONTAINER_BYTES / 1024:.1f} KiB + "
            f"{self.processes} process{'es' if self.processes > 1 else ''} × {PROCESS_BYTES >> 20} MiB"
        )


def copies(op: OperationConfig, duration_s: float) -> int:
    """Copies of ``op`` submitted before the run ends (a looping copy holds one set of tasks)."""
    if op.submit_at_s >= duration_s:
        return 0
    if op.arrivals is not None:
        return op.arrivals.count  # an upper bound: some may come after the end
    if op.repeat_every_s <= 0:
        return op.repeat
    return min(op.repeat, math.ceil((duration_s - op.submit_at_s) / op.repeat_every_s))


def estimate(sc: Scenario) -> Footprint:
    """An upper bound of the peak memory of a run: every submitted task still pending, every slot a
    container (the smallest task's size) busy."""
    ring = sc.ring_enabled
    node_bytes = NODE_DELTA_BYTES if ring or sc.heartbeat.mode == "delta" else NODE_PERIODIC_BYTES
    ops = sc.workload.operations
    per_op = [op.task_count * copies(op, sc.run.duration_s) for op in ops]
    tasks = sum(per_op)
    slots = 0.0
    if ops:
        cpu, ram = min(o.smallest_cpu for o in ops), min(o.smallest_ram_gib for o in ops)
        slots = sum(g.count * min(largest(g.cpu) / cpu, largest(g.ram_gib) / ram) for g in sc.cluster.nodes)
    containers = min(tasks, int(slots))
    nodes = sc.node_count
    processes = 1 + (sc.transport.worker_processes() if sc.transport.kind == "tcp" else 0)
    path = "cluster.nodes"
    if per_op and tasks * TASK_BYTES + containers * CONTAINER_BYTES > nodes * node_bytes:
        path = f"workload.operations[{per_op.index(max(per_op))}]"
    return Footprint(nodes, node_bytes, tasks, containers, processes, path)


def machine_memory() -> int:
    """Bytes this machine has available now (Linux: MemAvailable), else its physical memory."""
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError):
        return 1 << 62  # unknown: do not refuse
