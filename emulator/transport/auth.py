"""Challenge-response authentication of TCP connections: the shared secret never goes on the wire.

The accepting side sends a ``Challenge`` (a fresh random nonce) as its first frame; the connecting
side answers with a ``Proof``: HMAC-SHA256 keyed with the run's secret over the nonce and a label
naming the port (``RM``, ``CONTROL``, ``PEER``), so a proof made for one port cannot be replayed
on another, nor a nonce reflected back. A listener that answers a connection hands out nothing an
attacker can use: the nonce is random and the proof is only good for that one connection.

What a connection may send before its proof is bounded by ``PRE_AUTH_MAX_FRAME_BYTES`` (a proof
is ~50 bytes): a stranger cannot make the accepting side buffer a large frame.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets

import msgspec

NONCE_BYTES = 32
# The largest frame a connection may send before it has proved the secret.
PRE_AUTH_MAX_FRAME_BYTES = 4096

# One label per port: a proof answers one challenge on one kind of port.
RM = b"emulator/rm/v1"
CONTROL = b"emulator/control/v1"
PEER = b"emulator/peer/v1"


class Challenge(msgspec.Struct, tag=True, frozen=True):
    """The accepting side's first frame."""

    nonce: bytes


class Proof(msgspec.Struct, tag=True, frozen=True):
    """The connecting side's answer to a ``Challenge``, before anything else it sends."""

    mac: bytes


def new_challenge() -> Challenge:
    return Challenge(nonce=secrets.token_bytes(NONCE_BYTES))


def prove(secret: str, nonce: bytes, label: bytes) -> Proof:
    return Proof(mac=_mac(secret, nonce, label))


def verify(secret: str, challenge: Challenge, label: bytes, proof: Proof) -> bool:
    return hmac.compare_digest(_mac(secret, challenge.nonce, label), proof.mac)


def _mac(secret: str, nonce: bytes, label: bytes) -> bytes:
    # The label is fixed-size per port and after the fixed-size nonce: no ambiguity in the input.
    return hmac.new(secret.encode(), nonce + label, hashlib.sha256).digest()
