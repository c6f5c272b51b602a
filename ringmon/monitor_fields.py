"""The fields a ring monitor's parts share (``RingMonitor`` in ringmon/monitor.py, made of
``PredecessorWatching`` and ``RingFollowing``), declared for the type checker, and what they call on
each other; and ``Watch``, what a watcher knows about one predecessor."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Literal

from ringmon.config import RingConfig
from ringmon.membership import RingView, ViewCache
from ringmon.ports import Clock, Log, PeerChannel, RingCounters, Timer
from ringmon.protocol import Liveness
from ringmon.rtt import RttEstimator

EPS = 1e-9
# A node still behind this many intervals after asking for the ring asks again (the request or
# the answer may have been lost).
SYNC_RETRY_INTERVALS = 2.0


class Watch:
    """What a watcher knows about one predecessor."""

    __slots__ = ("heard", "last", "ping_sent", "pinged_at", "stall_reported_at", "vouched")

    def __init__(self, now: float) -> None:
        self.last = now  # last liveness (or when we started watching)
        self.pinged_at = -1.0
        self.ping_sent = -1.0  # the ping awaiting its answer (a round-trip sample, late or not)
        self.heard = True  # ring detector: heard since the previous tick
        self.stall_reported_at = -1e18
        # Its liveness comes as timestamps the channel guarantees until it says otherwise
        # (``sender_stopped`` / ``liveness_lossy``): no timer needs to watch it meanwhile.
        self.vouched = False


class MonitorFields:
    # A ring monitor's fields, as slots: more than 30 attributes would give every monitor a dict
    # of its own (~1.6 KB; instances share their attribute names only up to 30).
    __slots__ = (
        "_adopted_at",
        "_asleep_at",
        "_can_sleep",
        "_cfg",
        "_check_at",
        "_check_timer",
        "_clock",
        "_in_loop",
        "_interval",
        "_joined_at",
        "_joined_version",
        "_log",
        "_next_tick",
        "_on_removed",
        "_peers",
        "_phase",
        "_ping_s",
        "_prev_version",
        "_seq",
        "_sleepers",
        "_stall_age",
        "_strides",
        "_suspect_s",
        "_sync_asked",
        "_sync_at",
        "_tick_timer",
        "_to_rm",
        "_told",
        "_told_version",
        "_views",
        "active",
        "machine_id",
        "member",
        "ping_rtt",
        "stats",
        "successors",
        "view",
        "watching",
    )

    _cfg: RingConfig
    _clock: Clock
    _peers: PeerChannel
    _to_rm: Callable[[Any], None]
    _views: ViewCache
    stats: RingCounters
    _log: Log
    _stall_age: Callable[[], float]
    _on_removed: Callable[[], None] | None
    _phase: float
    _interval: float
    _strides: tuple[int, ...]
    _in_loop: bool
    _suspect_s: float
    _ping_s: float
    ping_rtt: RttEstimator
    machine_id: int
    view: RingView | None
    active: bool
    member: bool
    successors: tuple[int, ...]
    watching: dict[int, Watch]
    _seq: int
    _next_tick: float
    _told: list[int]
    _told_version: int
    _can_sleep: bool
    _asleep_at: float
    _tick_timer: Timer | None
    _check_timer: Timer | None
    _check_at: float
    _sync_asked: int
    _sync_at: float
    _joined_version: int
    _joined_at: float
    _prev_version: int
    _adopted_at: float
    # (``_sleepers``, the process's SleepLedger: typed where RingMonitor sets it; ringmon/sleepers.py
    # imports this module.)

    if TYPE_CHECKING:  # what the parts call on each other (defined in RingMonitor and its parts)

        def leave(self) -> None: ...

        def _wake(self) -> None: ...

        def _to_peer(self, dst: int, msg: Any) -> None: ...

        def _advertised(self) -> int:
            raise NotImplementedError

        def _liveness(self) -> Liveness:
            raise NotImplementedError

        def _arm(self, at: float) -> None: ...

        def _report(self, suspect: int, reason: Literal["silent", "stalled"]) -> None: ...

        def _want_sync(self, version: int) -> None: ...

        def _adopt(self, view: RingView) -> None: ...

        def _removed(self) -> None: ...
