"""The accepting side of an authenticated port (the harness control port, a worker's peer port).

Every connection is challenged (``auth``) as soon as it is accepted, and must then prove the
secret and say who it is (a hello) within ``handshake_timeout_s`` wall seconds, sending no frame
above ``auth.PRE_AUTH_MAX_FRAME_BYTES`` until its proof checks out. At most ``max_connections``
are served at once; at the cap a newcomer takes the slot of the connection that has not said who
it is yet and has been idle longest, so silent or slow connections cannot lock honest ones out
(one that has said who it is is never evicted; if all have, the newcomer is refused). The same
rules as the RM port (``tcp._ServerConnection``), whose "identified" is "a node registered".

What a stranger can cause at will (refusals, evictions, failed proofs, timeouts) is logged under
a budget (``rm.queues.logbudget``) and with sparse running counts, so a flood does not flood the log.
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from typing import Any

from emulator.time.clock import wall_time
from emulator.transport import auth
from emulator.transport.tcp import FramedConnection, TransportStats
from rm import Log, LogBudget

DEFAULT_MAX_CONNECTIONS = 256
DEFAULT_HANDSHAKE_TIMEOUT_S = 10.0


def sparse(n: int) -> bool:
    """Log the 1st, 2nd, 4th, 8th, ... and every 1,000th of a kind of refusal."""
    return n & (n - 1) == 0 or n % 1000 == 0


class Gate:
    """One listening port's limits and the connections it serves."""

    def __init__(self, name: str, log: Log, secret: str, label: bytes, stats: TransportStats,
                 max_connections: int = DEFAULT_MAX_CONNECTIONS,
                 handshake_timeout_s: float = DEFAULT_HANDSHAKE_TIMEOUT_S) -> None:
        """``name``: the prefix of this port's event names ("control", "peers")."""
        self.name = name
        self.log = log
        self.noisy = LogBudget(log, wall_time)
        self.secret = secret
        self.label = label
        self.stats = stats
        self.max_connections = max_connections
        self.handshake_timeout_s = handshake_timeout_s
        self.rejected = 0
        self.connections: set[GuardedConnection] = set()
        # Not identified yet, least recently active first (eviction order).
        self.pending: OrderedDict[GuardedConnection, None] = OrderedDict()

    def admit(self, conn: GuardedConnection) -> bool:
        stats = self.stats
        if len(self.connections) >= self.max_connections and self.pending:
            victim = next(iter(self.pending))
            stats.evicted += 1
            if sparse(stats.evicted):
                self.log.warning(f"{self.name}.evicted", peer=victim.peer, limit=self.max_connections,
                                 evicted_total=stats.evicted)
            victim.abort()  # its connection_lost comes later; the slot is free now
            self.connections.discard(victim)
            del self.pending[victim]
        if len(self.connections) >= self.max_connections:
            stats.refused += 1
            if sparse(stats.refused):
                self.log.warning(f"{self.name}.refused", peer=conn.peer, reason="too many connections",
                                 limit=self.max_connections, refused_total=stats.refused)
            return False
        self.connections.add(conn)
        self.pending[conn] = None
        return True

    def gone(self, conn: GuardedConnection) -> None:
        self.connections.discard(conn)
        self.pending.pop(conn, None)


class GuardedConnection(FramedConnection):
    """An accepted connection: challenged, then ``on_message`` once the peer proved the secret.
    Subclasses call ``identified()`` when the peer's hello is accepted."""

    def __init__(self, inbound_type: Any, gate: Gate, max_frame_bytes: int) -> None:
        super().__init__(inbound_type | auth.Proof, max_frame_bytes, gate.log, gate.stats, gate.noisy)
        self.gate = gate
        self._max_frame_bytes = max_frame_bytes
        self._challenge = auth.new_challenge()
        self.authenticated = False
        self.identity_known = False
        self._timer: asyncio.TimerHandle | None = None

    def connection_made(self, transport: Any) -> None:
        super().connection_made(transport)
        gate = self.gate
        if not gate.admit(self):
            self.abort()
            return
        self._decoder.max_frame_bytes = min(auth.PRE_AUTH_MAX_FRAME_BYTES, self._max_frame_bytes)
        self.send(0, self._challenge)
        # Wall time on purpose: this protects the socket, whatever the emulated clock does.
        self._timer = asyncio.get_running_loop().call_later(gate.handshake_timeout_s, self._too_slow)

    def data_received(self, data: bytes) -> None:
        pending = self.gate.pending
        if self in pending:
            pending.move_to_end(self)
        super().data_received(data)

    def decode_batch(self) -> int | None:
        # One frame at a time until the proof: the next frame may be bigger than allowed before it.
        return None if self.authenticated else 1

    def _too_slow(self) -> None:
        if not self.identity_known and not self.closed:
            self.stats.handshake_timeouts += 1
            self.refuse("no hello in time")

    def refuse(self, reason: str) -> None:
        """Close this connection (only this one) for ``reason``; logged under the budget."""
        self.gate.rejected += 1
        self._noisy.warning(f"{self.gate.name}.rejected", peer=self.peer, reason=reason)
        self.abort()

    def identified(self) -> None:
        self.identity_known = True
        self.gate.pending.pop(self, None)
        if self._timer is not None:
            self._timer.cancel()

    @property
    def trusted(self) -> bool:
        return self.identity_known

    def on_frame(self, channel: int, msg: Any) -> None:
        if isinstance(msg, auth.Proof):
            if self.authenticated:
                self.refuse("a second proof")
            elif auth.verify(self.gate.secret, self._challenge, self.gate.label, msg):
                self.authenticated = True
                self._decoder.max_frame_bytes = self._max_frame_bytes
            else:
                self.refuse("bad proof")
            return
        if not self.authenticated:
            self.refuse("no proof")
            return
        self.on_message(channel, msg)

    def on_message(self, channel: int, msg: Any) -> None:
        raise NotImplementedError

    def connection_lost(self, exc: Exception | None) -> None:
        super().connection_lost(exc)
        self.gate.gone(self)
        if self._timer is not None:
            self._timer.cancel()
