"""A suspicion the RM is probing (``rm.membership.service``): its rounds, its probe attempts, and the
internal deadlines queued behind the RM's inbound work."""

from __future__ import annotations

from ringmon.protocol import RingMessage
from rm.ports import Link, Timer
from rm.state.cluster import NodeRecord


class ProbeExpired(RingMessage, frozen=True):
    """Internal: a probe round's deadline, queued behind the RM's inbound work (never on the wire)."""

    machine_id: int
    probe_id: int
    round: int = 0


class Suspicion:
    """One suspected node: who reported it, its probe rounds, how it ended."""

    __slots__ = (
        "answered", "control", "control_ok", "expired", "orphan", "probe_id", "removed", "reporters", "round",
        "round_start", "round_wait", "sent", "since", "slow", "timer",
    )

    def __init__(self, probe_id: int, since: float) -> None:
        self.probe_id = probe_id  # the suspicion's id (its first attempt's)
        self.since = since
        self.reporters: set[int] = set()
        self.timer: Timer | None = None
        self.round = 0
        self.round_start = since
        self.round_wait = 0.0
        self.sent = 0  # attempts sent to the suspect
        self.slow = 0  # rounds added because the control was not answered either
        self.control: NodeRecord | None = None  # the reporter probed alongside
        self.control_ok = True
        self.answered = False  # the suspect answered one of its attempts
        self.expired = False  # confirmed because no attempt was answered in time
        self.removed = False
        self.orphan = False  # probed by the RM's own sweep, not on anyone's report


class Attempt:
    """One probe message: to the suspect, or to the control (its reporter)."""

    __slots__ = ("answered", "arrived", "link", "machine_id", "sent_at", "sus", "to_control")

    def __init__(
        self, sus: Suspicion, machine_id: int, link: Link, sent_at: float, to_control: bool
    ) -> None:
        self.sus = sus
        self.machine_id = machine_id
        self.link = link
        self.sent_at = sent_at
        self.to_control = to_control
        self.arrived = -1.0
        self.answered = False


class DisconnectExpired(RingMessage, frozen=True):
    """Internal: a node's connection was lost ``disconnect_grace`` ago (never on the wire)."""

    machine_id: int
