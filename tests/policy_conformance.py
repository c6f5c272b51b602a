"""What every scheduling policy must do, built-in or plugged in (docs/extending.md): a real RM and
real NodeManagers on a fake clock, a seeded workload, and checks that do not trust the RM's own
bookkeeping. tests/unit/test_policy_conformance.py runs them over every registered policy;
tests/system/test_extending.py over the example plug-in.

- never over-allocates a node: every node's launched-and-not-finished requests stay within its
  capacity (counted from the launches the node received), and no node ever rejects a launch;
- deterministic: the same events give the same launches (time, node, container, request);
- min shares, where the policy claims them (``honours_min_share``): a pool below its min share
  gets freed resources before a pool that submitted earlier."""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any

from emulator.harness.eventlog import make_logger
from nodemanager.config import HeartbeatConfig
from nodemanager.node import NodeManager
from nodemanager.stats import NodeCounters
from rm.protocol import ContainerLaunch, HeartbeatResponse, LaunchContainers, Resources
from rm.scheduler.config import SchedulerConfig
from rm.shell.manager import ResourceManager
from rm.state.operations import OperationSpec
from tests.helpers import FakeClock

EPS = 1e-6
Launch = tuple[float, str, int, float, float, float]  # time, node, container, cpu, ram, duration


@dataclass(eq=False)  # the RM keys nodes by their link: identity
class _Node:
    """One NodeManager and the RM-side link to it; messages go both ways through the clock
    (a node's ``send`` must not re-enter it)."""

    node: NodeManager
    stats: NodeCounters
    clock: FakeClock
    launches: list[Launch]
    # Launched here and not yet seen finished by the node: container -> (cpu, ram).
    live: dict[int, tuple[float, float]] = field(default_factory=dict)
    worst: float = 0.0  # the most of its capacity (either resource) ever requested at once
    closed: bool = False

    def send(self, msg: Any) -> None:  # the RM -> this node
        launched: tuple[ContainerLaunch, ...] = ()
        if isinstance(msg, LaunchContainers):
            launched = msg.containers
        elif isinstance(msg, HeartbeatResponse):
            launched = msg.launch
        for c in launched:
            self.launches.append((self.clock.now(), self.node.address, c.container_id,
                                  c.resources.cpu, c.resources.ram_gib, c.duration_s))
        self.clock.call_soon(self._deliver, msg)

    def _deliver(self, msg: Any) -> None:
        # Counted from the launch messages, accepted or not: the node's own check is not trusted.
        running = self.node.running_containers()
        self.live = {cid: r for cid, r in self.live.items() if cid in running}
        launched: tuple[ContainerLaunch, ...] = ()
        if isinstance(msg, LaunchContainers):
            launched = msg.containers
        elif isinstance(msg, HeartbeatResponse):
            launched = msg.launch
        for c in launched:
            self.live[c.container_id] = (c.resources.cpu, c.resources.ram_gib)
        total = self.node.resources
        cpu = sum(c for c, _ in self.live.values())
        ram = sum(r for _, r in self.live.values())
        self.worst = max(self.worst, cpu / total.cpu, ram / total.ram_gib)
        self.node.receive(msg)

    def close(self) -> None:
        self.closed = True


@dataclass
class Run:
    rm: ResourceManager
    clock: FakeClock
    nodes: list[_Node]
    launches: list[Launch]

    def pool_usage(self, name: str) -> Resources:
        return next(p.usage for p in self.rm.pools_view() if p.name == name)


def cluster(scheduler: SchedulerConfig, sizes: list[tuple[float, float]], seed: int) -> Run:
    """An RM (delta heartbeats: continuous scheduling as well as node updates) and its nodes."""
    clock = FakeClock()
    rm = ResourceManager(clock, make_logger(clock, None), None, scheduler, "delta")
    rng = random.Random(seed)
    launches: list[Launch] = []
    run = Run(rm, clock, [], launches)
    for i, (cpu, ram) in enumerate(sizes):
        stats = NodeCounters()
        holder: list[_Node] = []

        def to_rm(msg: Any, holder: list[_Node] = holder) -> None:
            clock.call_soon(rm.receive, holder[0], msg)

        nm = NodeManager(f"n{i}", Resources(cpu, ram), HeartbeatConfig(mode="delta", interval_s=3.0),
                         clock, to_rm, stats, make_logger(clock, None))
        holder.append(_Node(nm, stats, clock, launches))
        run.nodes.append(holder[0])
        nm.start(phase_s=rng.uniform(0.0, 3.0))
    return run


def seeded_run(scheduler: SchedulerConfig, seed: int, until: float = 240.0) -> Run:
    """Eight nodes of mixed shapes, three pools (one with a min share), a dozen operations of
    mixed shapes and lengths arriving over the first two minutes."""
    rng = random.Random(seed)
    sizes = [(rng.choice([4.0, 8.0, 16.0]), rng.choice([8.0, 16.0, 32.0])) for _ in range(8)]
    run = cluster(scheduler, sizes, seed)
    run.rm.add_pool("prod", weight=2.0, min_share=Resources(8, 8))
    run.rm.add_pool("batch")
    run.rm.add_pool("adhoc", parent="batch")
    for k in range(12):
        spec = OperationSpec(
            name=f"op{k}", pool=rng.choice(["prod", "batch", "adhoc", "root"]),
            demand=Resources(rng.choice([0.5, 1.0, 2.0, 3.0]), rng.choice([1.0, 2.0, 4.0, 6.0])),
            durations=[rng.uniform(5.0, 60.0) for _ in range(rng.randint(5, 60))],
            weight=rng.choice([1.0, 2.0]),
        )
        run.clock.call_later(rng.uniform(1.0, 120.0), run.rm.submit_operation, spec)
    run.clock.advance_to(until)
    return run


def check_never_over_allocates(scheduler: SchedulerConfig, seed: int) -> None:
    run = seeded_run(scheduler, seed)
    assert len(run.launches) > 100, "the workload must keep the cluster busy"
    for n in run.nodes:
        assert n.stats.containers_rejected == 0, f"{n.node.address} had to reject a launch"
        assert n.worst <= 1.0 + EPS, f"{n.node.address} was asked for {n.worst:.2f} x its capacity"
    for view in run.rm.nodes_view():  # and the RM's own view agrees at the end
        assert view.free.cpu >= -EPS and view.free.ram_gib >= -EPS, view


def check_deterministic(scheduler: SchedulerConfig, seed: int) -> None:
    first = seeded_run(scheduler, seed).launches
    assert first, "nothing was launched"
    assert seeded_run(scheduler, seed).launches == first


def check_min_share(scheduler: SchedulerConfig) -> None:
    """`prod` (min share 12 cpu) runs 6 tasks, `batch` takes the other 10 cpu, then `prod` asks for
    more. When batch's tasks end, `prod` must get the freed cpu up to 12 before `batch` gets any:
    plain DRF (no min share) would split it, `prod` ending near 8-10 cpu."""
    run = cluster(scheduler, [(8.0, 64.0), (8.0, 64.0)], seed=1)
    run.rm.add_pool("prod", min_share=Resources(12, 0))
    run.rm.add_pool("batch")
    one = Resources(1, 1)
    specs = [
        (4.0, OperationSpec(name="prod-long", pool="prod", demand=one, durations=[1000.0] * 6)),
        (4.5, OperationSpec(name="batch", pool="batch", demand=one, durations=[20.0] * 200)),
        (6.0, OperationSpec(name="prod-more", pool="prod", demand=one, durations=[1000.0] * 200)),
    ]
    for at, spec in specs:
        run.clock.call_later(at, run.rm.submit_operation, spec)
    run.clock.advance_to(10.0)
    assert (run.pool_usage("prod").cpu, run.pool_usage("batch").cpu) == (6, 10)
    run.clock.advance_to(40.0)  # batch's tasks ended at 24.5 and were reported by 27.5
    assert run.pool_usage("prod").cpu >= 12 - EPS, run.pool_usage("prod")
