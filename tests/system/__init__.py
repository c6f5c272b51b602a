"""Tests: the whole emulator in one process (virtual time, or the in-memory transport)."""
