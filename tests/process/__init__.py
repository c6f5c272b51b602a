"""Tests: real sockets on 127.0.0.1, real processes (killed for real), the real-time clock, a browser."""
