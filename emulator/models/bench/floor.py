"""The bench's floor (scenarios/studies/bench.toml): a periodic heartbeat as cheap as Python allows.

One plain heap of ``(time, seq, node)`` tuples drives the nodes; a node wakes up, builds a
heartbeat with its 20 container statuses, the "RM" looks the node up, walks the statuses against
its container table, answers, and runs a scheduler check; the node takes the answer and sleeps
one interval. No event loop, no handles, no message objects, no counters: what remains is the
work any periodic design must do per heartbeat. The bench reports its own cost per heartbeat
against this floor, measured on the same machine in the same invocation.
"""

from __future__ import annotations

import heapq
import random
import time
from collections import deque

STATUSES = 20


def floor_us_per_heartbeat(nodes: int = 1000, heartbeats: int = 300_000, interval_s: float = 3.0) -> float:
    """CPU µs per heartbeat of the minimal loop (median of three runs)."""
    runs = sorted(_one_run(nodes, heartbeats, interval_s) for _ in range(3))
    return runs[1]


def _one_run(nodes: int, heartbeats: int, interval_s: float) -> float:
    rng = random.Random(1)
    containers = [{n * STATUSES + c: (1, 2) for c in range(STATUSES)} for n in range(nodes)]
    running = [list(containers[n]) for n in range(nodes)]  # what each node runs
    inbox: deque[tuple[int, int, tuple[tuple[int, str, int], ...]]] = deque()
    last_id = [0] * nodes
    free = [0] * nodes
    heap = [(rng.random() * interval_s, n, n) for n in range(nodes)]
    heapq.heapify(heap)
    seq = nodes
    cpu0 = time.process_time()
    for _ in range(heartbeats):
        t, _, n = heapq.heappop(heap)
        # The node reports every running container (periodic), through the RM's inbox.
        inbox.append((n, last_id[n], tuple([(cid, "running", 0) for cid in running[n]])))
        # RM: validate, walk the statuses, answer, offer the node to the scheduler.
        node, hb_id, sts = inbox.popleft()
        if hb_id != last_id[node]:
            raise AssertionError("out of order")
        table = containers[node]
        kill = [cid for cid, state, _ in sts if state == "running" and cid not in table]
        last_id[node] = hb_id + 1
        response = (hb_id + 1, tuple(kill))
        if free[node] > 0:  # scheduler check: nothing pending fits a full node
            free[node] = 0
        # Node: take the answer, sleep one interval.
        last_id[node] = response[0]
        seq += 1
        heapq.heappush(heap, (t + interval_s, seq, n))
    return (time.process_time() - cpu0) / heartbeats * 1e6
