"""The nodes with room, in the order the cluster took them in, indexed so that a scheduling pass
walks only the nodes where some waiting task fits.

Nodes are kept in blocks of consecutive ``seq`` (the registration order passes go by); each block
knows the most free cpu and the most free ram among its nodes, so a pass skips a whole block when
no waiting demand could fit there, and resumes from any ``seq`` (a pass split into chunks).
Keeping a block's maxima costs O(1) per change; a decrease only marks them stale, recomputed
(O(block)) the next time a pass looks at that block.
"""

from __future__ import annotations

from bisect import bisect_left, insort
from collections.abc import Iterator, Sequence
from typing import Generic, Protocol, TypeVar


class Roomy(Protocol):
    """What the index reads of a node (``rm.state.cluster.NodeRecord``): its place in the
    registration order and its free resources."""

    @property
    def seq(self) -> int: ...

    @property
    def free_cpu(self) -> float: ...

    @property
    def free_ram(self) -> float: ...


NodeRecord = TypeVar("NodeRecord", bound=Roomy)  # the cluster's node record

# Nodes per block: a pass looks at up to this many nodes (a block whose maxima fit) to find one
# that does, and at one entry per block to skip the rest.
BLOCK = 64

# A task's demand: (cpu, ram GiB).
Demand = tuple[float, float]


class _Block(Generic[NodeRecord]):
    __slots__ = ("max_cpu", "max_ram", "nodes", "stale")

    def __init__(self) -> None:
        self.nodes: dict[int, NodeRecord] = {}  # seq -> node
        self.max_cpu = 0.0
        self.max_ram = 0.0
        self.stale = False

    def maxima(self) -> tuple[float, float]:
        if self.stale:
            nodes = self.nodes.values()
            self.max_cpu = max(n.free_cpu for n in nodes)
            self.max_ram = max(n.free_ram for n in nodes)
            self.stale = False
        return self.max_cpu, self.max_ram


class RoomIndex(Generic[NodeRecord]):
    def __init__(self, eps: float) -> None:
        """``eps``: the float tolerance of the policies' fit test (``rm.state.cluster.EPS``)."""
        self._eps = eps
        self._blocks: dict[int, _Block[NodeRecord]] = {}
        self._ids: list[int] = []  # the blocks holding nodes, in order
        self._size = 0

    def __len__(self) -> int:
        return self._size

    def put(self, node: NodeRecord) -> None:
        """``node`` has room (again, or other room than before)."""
        b = node.seq // BLOCK
        block = self._blocks.get(b)
        if block is None:
            block = self._blocks[b] = _Block()
            insort(self._ids, b)
        nodes = block.nodes
        fc, fr = node.free_cpu, node.free_ram
        if node.seq not in nodes:
            self._size += 1
            nodes[node.seq] = node
            if fc > block.max_cpu:
                block.max_cpu = fc
            if fr > block.max_ram:
                block.max_ram = fr
        elif fc >= block.max_cpu and fr >= block.max_ram:
            block.max_cpu, block.max_ram = fc, fr
        else:
            block.stale = True  # it may have held a maximum that just shrank: recount when needed

    def discard(self, node: NodeRecord) -> None:
        b = node.seq // BLOCK
        block = self._blocks.get(b)
        if block is None or block.nodes.pop(node.seq, None) is None:
            return
        self._size -= 1
        if block.nodes:
            block.stale = True
        else:
            del self._blocks[b]
            del self._ids[bisect_left(self._ids, b)]

    def in_order(self) -> list[NodeRecord]:
        """Every node with room, by ``seq``."""
        out: list[NodeRecord] = []
        for b in self._ids:
            nodes = self._blocks[b].nodes
            out.extend(nodes[s] for s in sorted(nodes))
        return out

    def fitting(self, start: int, demands: Sequence[Demand]) -> Iterator[NodeRecord]:
        """The nodes with ``seq >= start`` where at least one of ``demands`` fits (as the policies'
        fit test has it), by ``seq``. Safe while nodes fill or leave: each block is read when
        reached, and a node is checked again just before it is yielded."""
        if not demands:
            return
        eps = self._eps
        min_cpu = min(d[0] for d in demands) - 2 * eps  # looser than the fit test: never skips a fit
        min_ram = min(d[1] for d in demands) - 2 * eps
        ids = self._ids
        i = bisect_left(ids, start // BLOCK)
        while i < len(ids):
            b = ids[i]
            i += 1
            block = self._blocks.get(b)
            if block is None:
                continue
            max_cpu, max_ram = block.maxima()
            if max_cpu < min_cpu or max_ram < min_ram:
                continue
            nodes = block.nodes
            for seq in sorted(nodes):
                if seq < start:
                    continue
                node = nodes.get(seq)
                if node is not None and fits_any(node, demands, eps):
                    yield node
            # Blocks may have come or gone while this one was offered.
            i = bisect_left(ids, b + 1)


def fits_any(node: Roomy, demands: Sequence[Demand], eps: float) -> bool:
    """One of ``demands`` passes the policies' fit test on ``node`` (the same float expression)."""
    cpu = node.free_cpu + eps
    ram = node.free_ram + eps
    return any(c <= cpu and r <= ram for c, r in demands)
