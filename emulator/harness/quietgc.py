"""Keep Python's garbage collector from stalling a real-time run.

A collection scans every young tracked object: at E2's sizes a node host or the RM holds 50,000 to
100,000 of them (timers, containers, tasks), and one young collection stopped the loop for 20 to
85 ms of CPU, which at speed 20 is over a second of emulated lateness. The RM, the node hosts and
the ring free what they build by reference counting alone: a real-time E2 run leaves no reference
cycle for the collector (``tests/process/test_no_cycles.py`` keeps it so). So for the run the automatic
collector is off: one collection and a freeze before it, and nothing to find during it.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def quiet_gc(enabled: bool = True) -> Iterator[None]:
    if not enabled:
        yield
        return
    was_enabled = gc.isenabled()
    gc.collect()
    gc.freeze()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()
        gc.unfreeze()
