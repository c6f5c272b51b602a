"""Tests: one component at a time, with fakes: no run, no socket, no process."""
