"""TCP transport: protocol messages as length-prefixed msgpack frames (``framing``) over asyncio;
the connection both sides share (``connection``), the RM's server (``server``) and a node
host's client (``client``). What the rest of the emulator imports is named here."""

from emulator.transport.client import TcpClient
from emulator.transport.connection import (
    DEFAULT_ADMISSION_FRAMES,
    DEFAULT_HANDSHAKE_TIMEOUT_S,
    DEFAULT_MAX_CONNECTIONS,
    DEFAULT_MAX_WRITE_BUFFER_BYTES,
    FramedConnection,
    TcpLink,
    TransportStats,
)
from emulator.transport.server import TcpServer

__all__ = [
    "DEFAULT_ADMISSION_FRAMES",
    "DEFAULT_HANDSHAKE_TIMEOUT_S",
    "DEFAULT_MAX_CONNECTIONS",
    "DEFAULT_MAX_WRITE_BUFFER_BYTES",
    "FramedConnection",
    "TcpClient",
    "TcpLink",
    "TcpServer",
    "TransportStats",
]
