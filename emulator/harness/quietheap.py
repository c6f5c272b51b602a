"""Keep fresh memory pages from stalling a real-time RM (issue 34).

When a dict grows past two thirds of its table (43,690 entries, then 87,381) CPython builds a
table twice as big: the rehash takes ~0.15 ms at 50,000 entries, but the kernel then maps and
zero-fills the new table's pages on first touch, 640 of them for 2.6 MB, ~1.3 ms on the 2-core
machine. The RM's per-node dicts (nodes by id, by address, by connection; the ring's endpoints)
grow together, so at 50,000 nodes one registration held the loop 6-9 ms, mostly in page faults;
a ring version's tuples and a join storm's delta fault in the same way.

glibc's allocator can serve blocks up to 32 MB from its heap and keep what is freed there instead
of giving it back; with the heap touched once before the run, a table that grows later gets pages
that are already mapped. Python's small objects come from its own arenas, a page at a time, and
are not affected. Where the C library is not glibc this does nothing.
"""

from __future__ import annotations

import ctypes
import ctypes.util

# mallopt parameters (glibc's malloc.h).
_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3
_MMAP_THRESHOLD_MAX = 32 << 20  # the most glibc accepts on 64-bit
_KEEP = (1 << 31) - 1  # trim the heap only past 2 GiB free (a C int)
_BLOCK = 16 << 20  # touched a block at a time, each below the mmap threshold: from the heap


def warm_heap(megabytes: int) -> bool:
    """Keep the heap's freed memory, large blocks included, and touch ``megabytes`` of it now.
    Process-wide: for a process that runs the RM in real time. False where not glibc."""
    name = ctypes.util.find_library("c")
    if name is None:
        return False
    try:
        mallopt = ctypes.CDLL(name).mallopt
    except (OSError, AttributeError):
        return False
    if not (mallopt(_M_MMAP_THRESHOLD, _MMAP_THRESHOLD_MAX) and mallopt(_M_TRIM_THRESHOLD, _KEEP)):
        return False
    blocks = [bytearray(_BLOCK) for _ in range(max(1, -(-megabytes // 16)))]  # zero-filled: touched
    del blocks  # freed into the heap, which now keeps it
    return True
