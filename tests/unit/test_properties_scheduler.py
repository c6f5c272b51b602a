"""Property-based tests of scheduler invariants on random clusters and workloads."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from rm.protocol import ContainerStatus, Heartbeat, LaunchContainers, Register, Resources
from rm.scheduler.fair_share import progressive_filling
from rm.scheduler.policies.drf import drf_key
from rm.state.cluster import EPS
from rm.state.operations import Operation, OperationSpec, Pool
from tests.helpers import RecordingLink, sync_rm

resources = st.tuples(st.integers(1, 64), st.integers(1, 256))
demands = st.tuples(st.sampled_from([0.5, 1, 2, 3, 5, 8]), st.sampled_from([0.5, 1, 2, 4, 10, 17]))
ops_st = st.lists(
    st.tuples(demands, st.integers(1, 60), st.sampled_from([1.0, 2.0, 3.0])), min_size=1, max_size=6
)


@settings(max_examples=120, deadline=None)
@given(st.lists(resources, min_size=1, max_size=8), ops_st, st.randoms(use_true_random=False))
def test_rm_never_overcommits_and_follows_drf_order(nodes, ops, rnd) -> None:
    rm, clock = sync_rm()
    links = []
    for i, (cpu, ram) in enumerate(nodes):
        link = RecordingLink()
        rm.receive(link, Register(address=f"n{i}", resources=Resources(cpu, ram)))
        links.append(link)
    for j, ((cpu, ram), n, w) in enumerate(ops):
        rm.add_pool(f"p{j}", weight=w)
        rm.submit_operation(
            OperationSpec(name=f"o{j}", pool=f"p{j}", demand=Resources(cpu, ram), durations=[10.0] * n)
        )
    # White-box: every choice the policy makes is checked against the DRF order of that moment.
    policy = rm._life.policy
    root = rm._life.book.root
    original = policy.assign

    def checked_assign(node):
        choice = original(node)
        if choice is not None:
            cap = rm.snapshot().capacity
            for p in root.children:
                for other in p.operations:
                    if other.pending and node.fits(other.demand):
                        mine = drf_key(
                            choice.pool.usage_cpu,
                            choice.pool.usage_ram,
                            choice.pool.weight,
                            0,
                            0,
                            cap.cpu,
                            cap.ram_gib,
                        )
                        theirs = drf_key(p.usage_cpu, p.usage_ram, p.weight, 0, 0, cap.cpu, cap.ram_gib)
                        assert mine <= theirs
        return choice

    policy.assign = checked_assign  # type: ignore[method-assign]
    hb_ids = [0] * len(nodes)
    running: list[set[int]] = [set() for _ in nodes]
    for step in range(30):
        i = rnd.randrange(len(nodes))
        for msg in links[i].sent:
            if isinstance(msg, LaunchContainers):
                running[i].update(c.container_id for c in msg.containers)
        links[i].sent.clear()
        done = {c for c in running[i] if rnd.random() < 0.3}
        statuses = tuple(ContainerStatus(c, "complete") for c in sorted(done))
        statuses += tuple(ContainerStatus(c, "running") for c in sorted(running[i] - done))
        running[i] -= done
        clock.set(step)
        rm.receive(
            links[i],
            Heartbeat(
                machine_id=i + 1, heartbeat_id=hb_ids[i], healthy=True, statuses=statuses, full=True
            ),
        )
        hb_ids[i] += 1
        demand = {o.id: o.demand for o in rm.operations_view()}
        for rec in rm.nodes_view():
            assert rec.free.cpu >= -EPS and rec.free.ram_gib >= -EPS
            used_cpu = sum(demand[c.op_id].cpu for c in rec.containers)
            assert abs(used_cpu - (rec.total.cpu - rec.free.cpu)) < 1e-6
        snap = rm.snapshot()
        assert snap.allocated.cpu <= snap.capacity.cpu + EPS
    for op in rm.operations_view():
        assert op.running + op.pending + op.completed == op.total


@settings(max_examples=200, deadline=None)
@given(resources, ops_st)
def test_progressive_filling_is_feasible_and_max_min_fair(cap, ops) -> None:
    root = Pool("root")
    made = []
    for j, ((cpu, ram), n, w) in enumerate(ops):
        spec = OperationSpec(
            name=f"o{j}", pool="root", demand=Resources(cpu, ram), durations=[1.0] * n, weight=w
        )
        o = Operation(j + 1, spec, root, 0.0)
        root.operations.append(o)
        made.append(o)
    capacity = Resources(float(cap[0]), float(cap[1]))
    fs = progressive_filling(root, made, capacity)
    used_cpu = sum(fs.usage[o.id][0] for o in made)
    used_ram = sum(fs.usage[o.id][1] for o in made)
    assert used_cpu <= 1 + 1e-9 and used_ram <= 1 + 1e-9
    saturated = {j for j, u in ((0, used_cpu), (1, used_ram)) if u >= 1 - 1e-6}
    for o in made:
        share = fs.operations[o.id]
        demand_share = o.total * o.demand.dominant_share(capacity)
        assert share <= demand_share + 1e-9
        uses = {j for j, d in ((0, o.demand.cpu), (1, o.demand.ram_gib)) if d > 0}
        # Either its demand is met or it is blocked by a saturated resource it needs...
        assert share >= demand_share - 1e-6 or uses & saturated
        # ...and nobody blocked at the same time got more per unit of weight (max-min fairness).
        if share < demand_share - 1e-6:
            for other in made:
                assert fs.operations[other.id] / other.weight <= share / o.weight + 1e-6

