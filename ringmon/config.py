"""The ``[ring]`` section of a scenario: which failure detector, its timing, the RM brake."""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Annotated, Literal

import msgspec

Detector = Literal["ring", "kring"]
# The failure detectors by name, for the `hbemu.detectors` entry-point group (docs/extending.md):
# both are modes of the ring monitor and of the RM's membership service, so a plug-in can register
# a name but not yet an implementation; validation says so.
BUILTIN_DETECTORS: Mapping[str, str] = MappingProxyType({
    "ring": "ringmon.monitor:RingMonitor",
    "kring": "ringmon.monitor:RingMonitor",
})
Positive = Annotated[float, msgspec.Meta(gt=0)]


class RingConfig(msgspec.Struct, forbid_unknown_fields=True, kw_only=True, frozen=True):
    # None: on in delta heartbeat mode (the ring is then the only failure detector), off in periodic.
    enabled: bool | None = None
    # A registered failure detector (docs/extending.md). ring: the paper's design (one successor,
    # report after one silent interval, remove on one report). kring: one ring per stride, a
    # watchdog-sent liveness carrying the loop's stall age, a ping before reporting, removal only
    # after the RM's own probe goes unanswered.
    detector: str = "kring"
    interval_s: Positive = 3.0
    # kring: one ring per stride (1 = ascending ids); watchers per node = len(strides).
    strides: Annotated[list[Annotated[int, msgspec.Meta(ge=1)]], msgspec.Meta(min_length=1)] = (
        msgspec.field(default_factory=lambda: [1, 64])
    )
    # kring: silence (in intervals) after which a watcher pings its predecessor ...
    suspect_after: Annotated[float, msgspec.Meta(gt=1)] = 1.25
    # ... and how long (in intervals) it waits for the answer before reporting it.
    ping_timeout: Positive = 0.1
    # kring: how long (in intervals) the RM waits for a probe answer before removing the suspect.
    probe_timeout: Positive = 0.2
    # The probe is sent this many times, evenly within the timeout (a lost probe or answer must
    # not remove a live node).
    probe_attempts: Annotated[int, msgspec.Meta(ge=1, le=20)] = 3
    # The probe waits probe_timeout *plus* the measured round-trip timeout (ringmon.rtt), and is
    # extended (more attempts, a longer wait) while the network, not the suspect, looks at fault:
    # the reporter's own probe unanswered, or loss making every attempt lost plausible. Never
    # longer than this many intervals in all.
    probe_max_wait: Positive = 10.0
    # With no message from any node for this many intervals, no live watcher is in evidence (all
    # crashed, or a one-node cluster): the RM probes the members itself, least recently heard first.
    orphan_after: Positive = 10.0
    # A node whose main loop has been stalled longer than this is removed (and later rejoins).
    grace_s: Positive = 10.0
    # A node whose RM connection was closed (its host process died) and that has not registered
    # again after this many intervals is probed and, silent, removed at once: a closed connection
    # is evidence, not silence, so the brake does not hold it.
    disconnect_grace: Positive = 1.0
    # kring: a watcher whose own tick is this late (in intervals) does not trust its silence data.
    lag_tolerance: Positive = 0.5
    # The RM batches removals for at most this long into one versioned delta ...
    batch_s: Annotated[float, msgspec.Meta(ge=0)] = 0.5
    # ... or until this many removals are pending, whichever comes first.
    batch_max: Annotated[int, msgspec.Meta(ge=1)] = 64
    # Joins alone wait this many intervals (a joining node is watched within it; pending removals
    # take them along). Thousands register within seconds at start-up and every delta goes to
    # every node: with a delta per batch_s, 9,000 nodes joining over TCP made ~20 deltas, 180,000
    # deliveries, and their node host answered heartbeats seconds late after the warm-up.
    join_batch: Annotated[float, msgspec.Meta(ge=0)] = 1.0
    # Brake: at most this fraction of the ring is removed per window; more confirmed suspects are
    # held and re-probed when the window has room (a partition looks like a mass crash). A node
    # found alive after its removal (its late probe answer) stops removals for a whole window.
    brake_fraction: Annotated[float, msgspec.Meta(gt=0, le=1)] = 0.2
    brake_window_s: Positive = 30.0

    def __post_init__(self) -> None:
        if len(set(self.strides)) != len(self.strides):
            raise ValueError("`strides` must be distinct")
        if 1 not in self.strides:
            raise ValueError("`strides` must contain 1 (the id-ordered ring)")

    def ring_strides(self) -> tuple[int, ...]:
        # The paper's ring has exactly one successor whatever `strides` says.
        return (1,) if self.detector == "ring" else tuple(self.strides)

    def is_enabled(self, heartbeat_mode: str) -> bool:
        return self.enabled if self.enabled is not None else heartbeat_mode == "delta"
