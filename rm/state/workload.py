"""The workload book: the pool tree and the live operations, with their ids."""

from __future__ import annotations

from rm.protocol import ZERO, Resources
from rm.state.operations import Operation, OperationSpec, Pool


class WorkloadBook:
    def __init__(self, next_op_id: int = 1) -> None:
        self.root = Pool("root")
        self.pools: dict[str, Pool] = {"root": self.root}
        self.operations: dict[int, Operation] = {}
        self.next_op_id = next_op_id

    def add_pool(
        self, name: str, weight: float = 1.0, min_share: Resources = ZERO, parent: str = "root",
        max_cpu: float | None = None, max_ram: float | None = None,
    ) -> Pool:
        if name in self.pools:
            raise ValueError(f"pool {name!r} already exists")
        if parent not in self.pools:
            raise ValueError(f"pool {name!r}: unknown parent pool {parent!r}")
        pool = Pool(name, weight, min_share, self.pools[parent], max_cpu, max_ram)
        self.pools[name] = pool
        return pool

    def add_operation(self, spec: OperationSpec, at: float, op_id: int | None = None) -> Operation:
        """A new operation (the next id), or a recovered one with its journaled ``op_id``."""
        pool = self.pools.get(spec.pool)
        if pool is None:
            raise ValueError(f"operation {spec.name!r}: unknown pool {spec.pool!r}")
        if op_id is None:
            op_id = self.next_op_id
            self.next_op_id += 1
        op = Operation(op_id, spec, pool, at)
        pool.operations.append(op)
        self.operations[op.id] = op
        return op

    def remove_operation(self, op: Operation) -> None:
        op.pool.operations.remove(op)
        del self.operations[op.id]

    @property
    def pending_tasks(self) -> int:
        return self.root.pending_tasks
