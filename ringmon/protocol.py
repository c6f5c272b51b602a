"""Messages of the ring monitor (paper 004 flows 3-5): liveness between neighbours, the
unliveliness report a node sends to the RM about its predecessor, and ring updates from the RM."""

from __future__ import annotations

from typing import Literal

import msgspec

Action = Literal["normal", "resync", "shutdown"]


class RingMessage(msgspec.Struct, tag=True, frozen=True, gc=False):
    pass


class Ring(msgspec.Struct, frozen=True, gc=False):
    """A versioned ring: machine ids in ascending order."""

    version: int
    ids: tuple[int, ...]


class Liveness(RingMessage):
    """Node -> its ring successor, once per interval."""

    sender: int
    seq: int


class UnlivelinessReport(RingMessage):
    """Node -> RM: ``reporter`` heard nothing from ``suspect`` (its predecessor) in an interval."""

    reporter: int
    suspect: int
    ring_version: int


class UnlivelinessResponse(RingMessage):
    action: Action
    ring: Ring | None = None


class RingUpdate(RingMessage):
    """RM -> node: the current ring. Nodes ignore versions older than the one they hold."""

    ring: Ring
