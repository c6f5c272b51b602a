"""How long each thing the RM does holds its loop, CPU and wall, per kind, with the maxima and
where they fell: the RM of a 50,000-node delta + kring TCP run, in process (issue 34's "no RM
handler or pass with p99 above 2 ms or max above 5 ms at 50,000 nodes")::

    PYTHONPATH=$PWD python -m tests.rm_maxima_bench [--nodes 50000] [--duration 60] [--spread 6]
        [--delta-loss 0.01] [--cold-heap] [--profile-at N,...]

Assembled as over TCP: ``RMSide`` from scenarios/e2-scale-sweep.toml scaled to ``--nodes``, delta
mode, the cost meter installed (its ``busy_us_by_type`` is printed too), the RM's sends encoded by
the TCP frame encoder on one connection (one worker). Nodes are real NodeManagers on a fake clock
(0.5 ms each way), registering over ``--spread`` emulated seconds; their ring part follows the
ring's versions and asks for what it missed as ``ringmon.following`` does (a fraction
``--delta-loss`` of the deltas is lost on the way), without liveness. GC as in a run
(``quiet_gc``), and the heap warmed as a real-time ``RMSide`` of this size does (``--cold-heap``:
not). Every RM callback on the clock is timed: a delivery to the RM by message type (scheduler
events it runs at once by their own type, taken out of it), any RM timer by its callback's name,
with the page faults it took. The run is deterministic: ``--profile-at`` profiles the callbacks of
those numbers (the #N of the table) on a rerun.
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import random
import resource
import time
import tomllib
from collections import defaultdict
from pathlib import Path
from typing import Any

from emulator.harness import rmside
from emulator.harness.eventlog import make_logger
from emulator.harness.quietgc import quiet_gc
from emulator.harness.quietheap import warm_heap
from emulator.measure.costs import RMCostMeter
from emulator.measure.timing import HeartbeatTiming
from emulator.scenario.loader import scenario_from_dict
from emulator.study.points import scale_cluster
from emulator.transport.framing import FrameEncoder
from nodemanager.config import HeartbeatConfig
from nodemanager.node import NodeManager
from nodemanager.stats import NodeCounters
from ringmon.protocol import Probe, RingDelta, RingMessage, RingSyncRequest, RingUpdate
from rm.protocol import Resources
from tests.helpers import FakeClock, FakeTimer

LATENCY_S = 0.0005  # emulated, each way
# One timed callback: CPU s, wall s, emulated t, page faults, its number.
Sample = tuple[float, float, float, int, int]


def _faults() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt


class Clock(FakeClock):
    """A fake clock that times every callback of the RM side (a delivery to ``to_rm``, or a
    callback defined in ``rm``); ``nested`` holds what scheduler events inside them took."""

    speed = 1.0

    def __init__(self, profile_at: set[int]) -> None:
        super().__init__()
        self.samples: dict[str, list[Sample]] = defaultdict(list)
        self.nested = [0.0, 0.0, 0]  # CPU s, wall s, faults
        self.index = 0
        self.profile_at = profile_at
        self.to_rm: Any = None

    def run_until(self, t: float) -> None:
        self.advance_to(t)

    def _fire(self, timer: FakeTimer) -> None:
        kind = self._kind(timer)
        if kind is None:
            timer.callback(*timer.args)  # the nodes' side: not timed
        else:
            self._timed(kind, timer)

    def _kind(self, timer: FakeTimer) -> str | None:
        cb = timer.callback
        if cb == self.to_rm:
            return type(timer.args[1]).__name__
        owner = getattr(cb, "__self__", None)
        module = type(owner).__module__ if owner is not None else getattr(cb, "__module__", "")
        return "timer:" + cb.__qualname__ if (module or "").startswith("rm.") else None

    def _timed(self, kind: str, timer: FakeTimer) -> None:
        self.index += 1
        prof = cProfile.Profile() if self.index in self.profile_at else None
        if prof is not None:
            prof.enable()
        nested = self.nested
        n_cpu, n_wall, n_faults = nested
        f0 = _faults()
        c0, w0 = time.thread_time(), time.perf_counter()
        timer.callback(*timer.args)
        cpu = time.thread_time() - c0 - (nested[0] - n_cpu)
        wall = time.perf_counter() - w0 - (nested[1] - n_wall)
        faults = int(_faults() - f0 - (nested[2] - n_faults))
        self.samples[kind].append((cpu, wall, self.t, faults, self.index))
        if prof is not None:
            prof.disable()
            print(f"==== callback #{self.index} {kind} at {self.t:.3f}: {cpu * 1e6:.0f} us CPU")
            pstats.Stats(prof).sort_stats("cumtime").print_stats(20)

    def timing_events(self, handler: Any) -> Any:
        """Wraps the scheduler queue's handler: each event timed, and set aside as nested."""
        nested = self.nested
        samples = self.samples

        def timed(item: Any) -> Any:
            f0 = _faults()
            c0, w0 = time.thread_time(), time.perf_counter()
            out = handler(item)
            cpu, wall, faults = time.thread_time() - c0, time.perf_counter() - w0, _faults() - f0
            nested[0] += cpu
            nested[1] += wall
            nested[2] += faults
            samples[type(item).__name__].append((cpu, wall, self.t, faults, self.index))
            return out

        return timed


class Follower:
    """The ring part of a node as the RM sees it (``ringmon.following``, without liveness)."""

    __slots__ = ("asked", "mid", "send", "version")

    def __init__(self, send: Any) -> None:
        self.send = send
        self.version = -1
        self.mid = -1
        self.asked = -1

    def join(self, machine_id: int, ring: Any) -> None:
        self.mid = machine_id
        if ring is not None and ring.version > self.version:
            self.version = ring.version

    def leave(self) -> None:
        self.mid = -1

    def from_rm(self, msg: Any) -> None:
        if self.mid < 0:
            return
        if type(msg) is RingDelta:
            if msg.base_version > self.version:
                if msg.version > self.asked:  # a gap: ask once per version
                    self.asked = msg.version
                    self.send(RingSyncRequest(machine_id=self.mid, version=self.version))
            elif msg.base_version == self.version:
                self.version = msg.version
        elif type(msg) is RingUpdate and msg.ring.version > self.version:
            self.version = msg.ring.version


class Conn:
    """The worker's one connection: frames encoded as over TCP, delivered once per loop pass."""

    def __init__(self, clock: Clock, loss: float) -> None:
        self.clock = clock
        self.encoder = FrameEncoder(1 << 26)
        self.out = bytearray()
        self.pending: list[tuple[Link, Any]] = []
        self.loss = loss
        self.rng = random.Random(7)

    def deliver_all(self) -> None:
        batch, self.pending = self.pending, []
        for link, msg in batch:
            link.deliver(msg)


class Link:
    """The RM's end of one node's channel."""

    __slots__ = ("channel", "closed", "conn", "node", "ring")
    authenticated = True

    def __init__(self, conn: Conn, channel: int) -> None:
        self.conn, self.channel, self.closed = conn, channel, False
        self.node: NodeManager | None = None
        self.ring: Follower | None = None

    def send(self, msg: Any) -> None:
        conn = self.conn
        conn.encoder.append(conn.out, self.channel, msg)
        if len(conn.out) > 1 << 20:
            conn.out.clear()
        if not conn.pending:
            conn.clock.call_later(LATENCY_S, conn.deliver_all)
        conn.pending.append((self, msg))

    def deliver(self, msg: Any) -> None:
        if isinstance(msg, RingMessage) and not isinstance(msg, Probe):
            conn = self.conn
            if type(msg) is RingDelta and conn.loss and conn.rng.random() < conn.loss:
                return  # lost: the node asks for what it missed when the next delta comes
            assert self.ring is not None
            self.ring.from_rm(msg)
        else:
            assert self.node is not None
            self.node.receive(msg)

    def close(self) -> None:
        self.closed = True


class Hosting:
    lead_s = 0.0

    def __init__(self, nodes: list[NodeManager]) -> None:
        self.nodes = nodes
        self.timing = HeartbeatTiming()

    def addresses(self) -> list[str]:
        return [n.address for n in self.nodes]

    def counters(self) -> NodeCounters:
        return NodeCounters()

    def heartbeat_intervals(self) -> HeartbeatTiming:
        return self.timing

    def machine_ids(self) -> dict[str, int]:
        return {n.address: n.machine_id for n in self.nodes}

    def realities(self) -> None:
        return None


class Listener:
    def drop_all(self) -> None: ...

    def listen(self) -> None: ...


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("::")[0] if __doc__ else None)
    ap.add_argument("--nodes", type=int, default=50000)
    ap.add_argument("--duration", type=float, default=60.0, help="emulated s")
    ap.add_argument("--spread", type=float, default=6.0, help="registrations over this many emulated s")
    ap.add_argument("--delta-loss", type=float, default=0.01, help="fraction of ring deltas lost")
    ap.add_argument("--cold-heap", action="store_true", help="no warm heap (as before it existed)")
    ap.add_argument("--top", type=int, default=4, help="maxima shown per kind")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--profile-at", default="", help="callback numbers to profile (#N in the table)")
    args = ap.parse_args()
    data = tomllib.loads(Path("scenarios/e2-scale-sweep.toml").read_text(encoding="utf-8"))
    scale_cluster(data, args.nodes, True)
    data["heartbeat"]["mode"] = "delta"
    data["run"].update(clock="virtual", duration_s=args.duration, warmup_s=min(45.0, args.duration / 2))
    data["transport"] = {"kind": "memory"}  # the RM side is the same; its sends are framed here
    sc = scenario_from_dict(data, "<rm_maxima_bench>")
    if not args.cold_heap and args.nodes >= rmside.WARM_HEAP_FROM_NODES:
        # As a real-time RMSide of this size does (its clock is virtual here).
        warm_heap(args.nodes * rmside.WARM_HEAP_KIB_PER_NODE // 1024)
    clock = Clock({int(k) for k in args.profile_at.split(",") if k})
    log = make_logger(clock, None)
    nodes: list[NodeManager] = []
    side = rmside.RMSide(sc, clock, log, Hosting(nodes), Listener(), lambda: args.nodes)  # type: ignore[arg-type]
    meter = RMCostMeter(side.rm)
    meter.install(side.decisions)
    side.rm.instrument(lambda handler: handler, clock.timing_events)
    clock.to_rm = side.receive
    conn = Conn(clock, args.delta_loss)
    group = sc.cluster.nodes[0]
    resources = Resources(group.cpu, group.ram_gib)  # type: ignore[arg-type]
    config = HeartbeatConfig(mode="delta", interval_s=sc.heartbeat.interval_s)
    stats = NodeCounters()
    for i in range(args.nodes):
        link = Link(conn, i)
        send = _sender(clock, side.receive, link)
        link.ring = Follower(send)
        link.node = NodeManager(f"e2-{i}", resources, config, clock, send, stats, log,
                                membership=link.ring, peer_endpoint="127.0.0.1:40000")
        nodes.append(link.node)
    rng = random.Random(args.seed)
    with quiet_gc():
        side.start()
        for node in nodes:
            node.start(rng.uniform(0, args.spread))
        cpu0 = time.process_time()
        t = 0.0
        while t < args.duration:
            t += 1.0
            clock.run_until(t)
        side.finish()
        cpu = time.process_time() - cpu0
    _report(side.rm, clock, meter, cpu, args.top)


def _sender(clock: Clock, receive: Any, link: Link) -> Any:
    return lambda msg: clock.call_later(LATENCY_S, receive, link, msg)


def _report(rm: Any, clock: Clock, meter: RMCostMeter, cpu_s: float, top: int) -> None:
    ring = rm.ring_snapshot()
    print(f"registered {len(list(rm.nodes()))}, ring members {len(ring.members)}, allocations "
          f"{rm.allocations}; the whole run took {cpu_s:.1f} s CPU")
    print(f"{'kind':34s} {'count':>7s} {'p99 CPU':>8s} {'p99 wall':>8s} {'max CPU':>8s} {'max wall':>8s}"
          "   top maxima: CPU us @ emulated s (page faults) #callback")
    for kind, samples in sorted(clock.samples.items(), key=lambda kv: -max(x[0] for x in kv[1])):
        cpus = sorted(x[0] for x in samples)
        walls = sorted(x[1] for x in samples)
        k = min(len(cpus) - 1, int(0.99 * len(cpus)))
        tops = " ".join(f"{c * 1e6:.0f}@{t:.2f}({f})#{n}" for c, _, t, f, n in
                        sorted(samples, key=lambda x: -x[0])[:top])
        print(f"{kind:34s} {len(samples):7d} {cpus[k] * 1e6:8.0f} {walls[k] * 1e6:8.0f} "
              f"{cpus[-1] * 1e6:8.0f} {walls[-1] * 1e6:8.0f}   {tops}")
    print("busy_us_by_type (the cost meter, wall us):")
    for kind, h in meter.busy.items():
        print(f"  {kind:16s} n={h.count:7d} p99={h.quantile(0.99) * 1e6:8.0f} max={h.max * 1e6:8.0f}")
    stats = rm.membership.stats
    print(f"ring deltas {stats.deltas}, catch-ups {stats.syncs} (combined {stats.syncs_combined}), "
          f"ring messages {stats.ring_messages}")


if __name__ == "__main__":
    main()
