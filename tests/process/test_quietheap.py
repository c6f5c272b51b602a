"""A warm heap (emulator/harness/quietheap.py): a table that grows after it finds its pages mapped.
In a child process: the allocator's settings are process-wide."""

from __future__ import annotations

import subprocess
import sys

import pytest

# Fills a dict to 43,690 entries (two thirds of its 65,536 slots), then adds one, which grows its
# table to 2.6 MB; prints whether the heap was warmed and the page faults that one insertion took.
_PROGRAM = """
import gc, resource, sys
from emulator.harness.quietheap import warm_heap
gc.disable()
warm = warm_heap(32) if sys.argv[1] == "warm" else None
table = dict.fromkeys(range(43_690))
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
table[-1] = None
print(warm, resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
"""


def _growth(mode: str) -> tuple[str, int]:
    out = subprocess.run([sys.executable, "-c", _PROGRAM, mode], capture_output=True, text=True,
                         check=True).stdout.split()
    return out[0], int(out[1])


def test_a_table_growing_on_a_warm_heap_takes_no_fresh_pages() -> None:
    warm, warm_faults = _growth("warm")
    if warm != "True":
        pytest.skip("not glibc: warm_heap does nothing")
    _, cold_faults = _growth("cold")
    assert cold_faults > 300  # the new table's pages, zero-filled by the kernel on first touch
    assert warm_faults < 30
