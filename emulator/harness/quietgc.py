"""Keep Python's garbage collector from stalling a real-time run.

A full collection scans every tracked object: with a large heap (tens of thousands of nodes, or
whatever a long-lived process built before the run) it stops the loop for tens of ms, which at
high speed is seconds of emulated lateness. Collecting once and freezing what exists moves it out
of later scans; a higher first threshold makes the young collections rarer.
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
    threshold = gc.get_threshold()
    gc.collect()
    gc.freeze()
    gc.set_threshold(50_000, 50, 1000)
    try:
        yield
    finally:
        gc.set_threshold(*threshold)
        gc.unfreeze()
