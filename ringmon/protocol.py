"""Messages of the ring monitor (paper 004 flows 3-5): liveness between neighbours, the
unliveliness report a node sends to the RM about its predecessor, and ring updates from the RM."""

from __future__ import annotations

from typing import Literal

import msgspec

Action = Literal["normal", "resync", "shutdown"]


class RingMessage(msgspec.Struct, tag=True, frozen=True, gc=False):
    pass


class Ring(msgspec.Struct, frozen=True, gc=False, omit_defaults=True):
    """A versioned ring: machine ids in ascending order. When nodes live in several processes,
    ``hosts`` lists the peer endpoints ("host:port") of those processes and ``host_of[k]`` is the
    index in ``hosts`` of the process hosting ``ids[k]``; both are empty otherwise."""

    version: int
    ids: tuple[int, ...]
    hosts: tuple[str, ...] = ()
    host_of: tuple[int, ...] = ()


class Liveness(RingMessage, frozen=True):
    """Node -> its ring successor, once per interval."""

    sender: int
    seq: int
    # How long the sender's main event loop has been stalled (0 when it runs); sent by a watchdog
    # that does not share that loop, so a hung node is told apart from a dead one.
    stalled_s: float = 0.0
    # The ring version the sender holds (anti-entropy: a receiver holding an older one missed a
    # change and asks the RM for the ring; -1: none).
    ring_version: int = -1


class UnlivelinessReport(RingMessage, frozen=True):
    """Node -> RM: ``reporter`` heard nothing from ``suspect`` (its predecessor) in an interval."""

    reporter: int
    suspect: int
    ring_version: int
    # "silent": no liveness for the suspicion timeout; "stalled": liveness says the suspect's main
    # loop has been stalled longer than the grace.
    reason: Literal["silent", "stalled"] = "silent"


class UnlivelinessResponse(RingMessage, frozen=True):
    action: Action
    ring: Ring | None = None


class RingUpdate(RingMessage, frozen=True):
    """RM -> node: the current ring. Nodes ignore versions older than the one they hold."""

    ring: Ring


class LivenessPing(RingMessage, frozen=True):
    """Watcher -> suspect: answer with a ``Liveness`` now (a second chance before reporting)."""

    sender: int


class RingDelta(RingMessage, frozen=True, omit_defaults=True):
    """RM -> node: the changes from ring ``base_version`` to ``version`` (a batch of joins and
    removals). Id lists are gap-encoded (see ``ringmon.membership.encode_ids``) so a batch of
    n ids costs about n bytes on the wire. A node holding ``base_version`` applies it; one holding
    ``version`` or newer ignores it; one holding an older version asks for the full ring. With
    nodes in several processes, ``hosts`` is the ring's table of peer endpoints and
    ``added_hosts[k]`` the index in it of the process hosting the k-th added id (ascending)."""

    base_version: int
    version: int
    added: tuple[int, ...]
    removed: tuple[int, ...]
    hosts: tuple[str, ...] = ()
    added_hosts: tuple[int, ...] = ()


class RingSyncRequest(RingMessage, frozen=True):
    """Node -> RM: I missed ring changes after ``version``; send me the full ring."""

    machine_id: int
    version: int


class Probe(RingMessage, frozen=True):
    """RM -> suspected node, on its RM connection (not the liveness channel). Answered even by a
    node still registering (its RegisterResponse may have been lost): it is alive."""

    probe_id: int
    machine_id: int = -1


class ProbeAck(RingMessage, frozen=True):
    """Node -> RM: alive; ``stalled_s`` as in ``Liveness``."""

    machine_id: int
    probe_id: int
    stalled_s: float = 0.0
