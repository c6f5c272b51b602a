"""The resource tracker: registration and heartbeats, and the container ledger."""
