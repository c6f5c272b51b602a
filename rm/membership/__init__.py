"""Ring membership: liveness reports, probes, removals, and the ring deltas sent to nodes."""
