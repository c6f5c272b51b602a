"""A warm heap (emulator/harness/quietheap.py): a table that grows after it finds its pages mapped.
In a child process: the allocator's settings are process-wide."""

from __future__ import annotations

import subprocess
import sys

import pytest

# Grows a dict to 100,000 entries (a 5 MB table at its last growth) and prints whether the heap
# was warmed and the most page faults one insertion took.
_PROGRAM = """
import gc, resource, sys
from emulator.harness.quietheap import warm_heap
gc.disable()
warm = warm_heap(32) if sys.argv[1] == "warm" else None
faults = lambda: resource.getrusage(resource.RUSAGE_SELF).ru_minflt
table, worst = {}, 0
for i in range(100_000):
    before = faults()
    table[i] = i
    worst = max(worst, faults() - before)
print(warm, worst)
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
    assert cold_faults > 500  # the 5 MB table's pages, zero-filled by the kernel on first touch
    assert warm_faults < 50
