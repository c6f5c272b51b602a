"""The container ledger: container ids, and the commands no node report has confirmed yet.

A launch is unconfirmed until a report mentions its container; a kill until a report shows the
container complete. Both are sent again after ``command_timeout_s`` (commands lost on the way;
nodes ignore duplicates). Ids are never reused, across RM lives too (they start above the
journal's highest).
"""

from __future__ import annotations

from rm.cluster import Allocation, NodeRecord


class ContainerLedger:
    def __init__(self, next_container_id: int = 1) -> None:
        self.next_container_id = next_container_id
        self._unconfirmed: dict[int, tuple[Allocation, float]] = {}
        self._kills: dict[int, tuple[NodeRecord, float]] = {}

    def new_id(self) -> int:
        cid = self.next_container_id
        self.next_container_id += 1
        return cid

    # ---- launches ------------------------------------------------------------------------

    def launched(self, alloc: Allocation, now: float) -> None:
        self._unconfirmed[alloc.container_id] = (alloc, now)

    def confirmed(self, cid: int) -> None:
        """A report mentions the container (running, or it ended)."""
        if self._unconfirmed:
            self._unconfirmed.pop(cid, None)

    def overdue_launches(self, deadline: float, now: float) -> dict[NodeRecord, list[Allocation]]:
        """Launches sent before ``deadline`` and never confirmed, by node; they count as sent now."""
        out: dict[NodeRecord, list[Allocation]] = {}
        for alloc, sent_at in self._unconfirmed.values():
            if sent_at < deadline:
                out.setdefault(alloc.node, []).append(alloc)
        for allocs in out.values():
            for a in allocs:
                self._unconfirmed[a.container_id] = (a, now)
        return out

    # ---- kills -----------------------------------------------------------------------------

    def expect_kills(self, node: NodeRecord, cids: list[int] | tuple[int, ...], now: float) -> None:
        for cid in cids:
            self._kills[cid] = (node, now)

    def kill_confirmed(self, cid: int) -> None:
        self._kills.pop(cid, None)

    def in_flight(self) -> tuple[set[int], set[int]]:
        """Containers whose launch, and whose kill, no report has confirmed yet."""
        return set(self._unconfirmed), set(self._kills)

    def overdue_kills(self, deadline: float) -> list[tuple[int, NodeRecord]]:
        return [(cid, node) for cid, (node, t) in self._kills.items() if t < deadline]

    def forget_node(self, node: NodeRecord, container_ids: list[int]) -> None:
        """``node`` is gone with ``container_ids`` (every container it held: an unconfirmed
        launch is one of them, whatever released a container confirmed it): its launches and
        kills are moot."""
        if self._unconfirmed:
            for cid in container_ids:
                self._unconfirmed.pop(cid, None)
        if self._kills:
            for cid in [c for c, (n, _) in self._kills.items() if n is node]:
                del self._kills[cid]

    @property
    def unconfirmed(self) -> int:
        return len(self._unconfirmed)

    @property
    def pending_kills(self) -> int:
        return len(self._kills)
