"""The container ledger: container ids, and the commands no node report has confirmed yet.

A launch is unconfirmed until a report mentions its container; a kill until a report shows the
container complete. Both are sent again after ``command_timeout_s`` (commands lost on the way;
nodes ignore duplicates). Ids are never reused, across RM lives too (they start above the
journal's highest).

What a node reports is not trusted to size the ledger: a kill is remembered (and resent) only for
a container id the RM has issued, and at most ``max_kills_per_node`` per node. Any other id a
node claims to run was answered once, in the reply to that report, and is not stored.
"""

from __future__ import annotations

from rm.state.cluster import Allocation, NodeRecord

# Far above what an honest node holds (one container needs at least the minimum allocation).
MAX_KILLS_PER_NODE = 1024


class ContainerLedger:
    def __init__(self, next_container_id: int = 1, max_kills_per_node: int = MAX_KILLS_PER_NODE) -> None:
        self.next_container_id = next_container_id
        self.max_kills_per_node = max_kills_per_node
        self._unconfirmed: dict[int, tuple[Allocation, float]] = {}
        # Unconfirmed launches per node: a report from a node with none confirms nothing, so
        # the tracker need not look its running containers up here (every periodic report).
        # Read by the tracker as ``node in awaiting`` (this one dict, never replaced; only the
        # ledger changes it).
        self.awaiting: dict[NodeRecord, int] = {}
        self._kills: dict[NodeRecord, dict[int, float]] = {}
        # Kills answered once but not remembered: ids never issued, or past a node's bound.
        self.kills_not_kept = 0

    def new_id(self) -> int:
        cid = self.next_container_id
        self.next_container_id += 1
        return cid

    def issued(self, cid: int) -> bool:
        """This RM (or an earlier life, per the journal) handed out container id ``cid``."""
        return 0 < cid < self.next_container_id

    # ---- launches ------------------------------------------------------------------------

    def launched(self, alloc: Allocation, now: float) -> None:
        if alloc.container_id not in self._unconfirmed:
            self.awaiting[alloc.node] = self.awaiting.get(alloc.node, 0) + 1
        self._unconfirmed[alloc.container_id] = (alloc, now)

    def confirmed(self, cid: int) -> None:
        """A report mentions the container (running, or it ended)."""
        if self._unconfirmed:
            entry = self._unconfirmed.pop(cid, None)
            if entry is not None:
                self._settled(entry[0].node)

    def awaits(self, node: NodeRecord) -> bool:
        """Some launch on ``node`` is not confirmed yet."""
        return node in self.awaiting

    def _settled(self, node: NodeRecord) -> None:
        left = self.awaiting[node] - 1
        if left:
            self.awaiting[node] = left
        else:
            del self.awaiting[node]

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
        """Kills sent to ``node``: remember those to resend until a report confirms them."""
        if not cids:
            return
        pending = self._kills.get(node)
        if pending is None:
            pending = self._kills[node] = {}
        limit = self.max_kills_per_node
        for cid in cids:
            if self.issued(cid) and (cid in pending or len(pending) < limit):
                pending[cid] = now
            else:
                self.kills_not_kept += 1
        if not pending:
            del self._kills[node]

    def kill_confirmed(self, node: NodeRecord, cid: int) -> None:
        pending = self._kills.get(node)
        if pending is not None and pending.pop(cid, None) is not None and not pending:
            del self._kills[node]

    def overdue_kills(self, deadline: float) -> dict[NodeRecord, list[int]]:
        """Kills sent before ``deadline`` and never confirmed, by node."""
        out: dict[NodeRecord, list[int]] = {}
        for node, pending in self._kills.items():
            late = [cid for cid, t in pending.items() if t < deadline]
            if late:
                out[node] = late
        return out

    def in_flight(self) -> tuple[set[int], set[int]]:
        """Containers whose launch, and whose kill, no report has confirmed yet."""
        return set(self._unconfirmed), {cid for pending in self._kills.values() for cid in pending}

    def forget_node(self, node: NodeRecord, container_ids: list[int]) -> None:
        """``node`` is gone with ``container_ids`` (every container it held: an unconfirmed
        launch is one of them, whatever released a container confirmed it): its launches and
        kills are moot."""
        if self._unconfirmed:
            for cid in container_ids:
                self._unconfirmed.pop(cid, None)
        self.awaiting.pop(node, None)
        self._kills.pop(node, None)

    @property
    def unconfirmed(self) -> int:
        return len(self._unconfirmed)

    @property
    def pending_kills(self) -> int:
        return sum(len(p) for p in self._kills.values())
