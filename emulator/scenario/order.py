"""Order within a job: the checks on operations' ``after`` / ``after_start`` / ``lasts_for_job``."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from emulator.scenario.schema import OperationConfig


def check_order(operations: Sequence[OperationConfig]) -> None:
    """Every name in ``after``/``after_start`` is another operation, submitted once (no `repeat`,
    `loop` or `arrivals` on either side), and the order has no cycle."""
    by_name = {o.name: o for o in operations}
    for am in operations:
        if am.lasts_for_job:
            if not am.job or am.task_count != 1:
                raise ValueError(f"operation `{am.name}`: `lasts_for_job` needs a `job` and one task")
            for o in operations:
                if o.job == am.job:
                    _once(o, f"its job `{am.job}` has an AM (`lasts_for_job`)")
    ordered = [o for o in operations if o.after or o.after_start]
    if not ordered:
        return
    for op in ordered:
        for field, names in (("after", op.after), ("after_start", op.after_start)):
            for name in names:
                other = by_name.get(name)
                if other is None or name == op.name:
                    raise ValueError(f"operation `{op.name}`: `{field}` names `{name}`; expected another "
                                     "operation of the workload")
                _once(other, f"operation `{op.name}` waits for it")
        _once(op, "it waits for other operations")
    state: dict[str, int] = {}  # 1: on the current path, 2: done

    def visit(name: str, path: list[str]) -> None:
        if state.get(name) == 2:
            return
        if state.get(name) == 1:
            cycle = " -> ".join([*path[path.index(name):], name])
            raise ValueError(f"operations wait for each other in a cycle: {cycle}")
        state[name] = 1
        op = by_name[name]
        for dep in (*op.after, *op.after_start):
            visit(dep, [*path, name])
        state[name] = 2

    for op in ordered:
        visit(op.name, [])


def _once(op: OperationConfig, why: str) -> None:
    if op.loop or op.repeat > 1 or op.arrivals is not None:
        raise ValueError(f"operation `{op.name}`: {why}, so it must be submitted once (no `repeat`, "
                         "`loop` or `arrivals`)")
