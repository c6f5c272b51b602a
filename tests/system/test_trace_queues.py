"""YARN fair-scheduler.xml as pools: the queue tree, weights, min resources in each notation, root's
policy; what is not modelled named in a warning; unsafe or bad files refused with one line; on
import and as `[workload] queues_file`."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from emulator.cli.main import main
from emulator.scenario.loader import ScenarioError, load_scenario
from emulator.scenario.traces import queues
from emulator.scenario.traces.model import TraceError
from tests.process.test_trace_bounds import emulator, one_error_line

DATA = Path(__file__).parents[1] / "data" / "traces"
ALLOCATIONS = """<?xml version="1.0" encoding="UTF-8"?>
<allocations>
  <queue name="sls_queue_1">
    <minResources>10240 mb, 4 vcores</minResources>
    <maxResources>90000 mb, 40 vcores</maxResources>
    <weight>2.5</weight>
    <schedulingPolicy>drf</schedulingPolicy>
  </queue>
  <queue name="research" type="parent">
    <weight>0.5</weight>
    <queue name="ml">
      <minResources>vcores=2, memory-mb=2048</minResources>
      <aclSubmitApps>alice</aclSubmitApps>
      <schedulingPolicy>fifo</schedulingPolicy>
    </queue>
    <queue name="etl"><minResources>25% cpu, 50% memory</minResources></queue>
  </queue>
  <user name="bob"><maxRunningApps>3</maxRunningApps></user>
  <defaultQueueSchedulingPolicy>drf</defaultQueueSchedulingPolicy>
  <colour>blue</colour>
</allocations>
"""


def pools_of(q: queues.Queues) -> dict[str, tuple[str, float, float, float]]:
    return {p["name"]: (p["parent"], p.get("weight", 1.0), p.get("min_cpu", 0.0), p.get("min_ram_gib", 0.0))
            for p in q.pools}


def test_tree_weights_minimums_policy_and_warnings(tmp_path: Path) -> None:
    path = tmp_path / "fair-scheduler.xml"
    path.write_text(ALLOCATIONS)
    q = queues.read(path, cluster=(40.0, 160.0))
    assert pools_of(q) == {
        "sls_queue_1": ("root", 2.5, 4.0, 10.0),
        "research": ("root", 0.5, 0.0, 0.0),
        "research.ml": ("research", 1.0, 2.0, 2.0),
        "research.etl": ("research", 1.0, 10.0, 80.0),
    }
    assert q.policy == "drf"
    text = "\n".join(q.warnings)
    assert "research.ml" in text and "own schedulingPolicy" in text
    # maxResources becomes the pool's maximum; one policy schedules every pool: that is warned.
    (capped,) = [p for p in q.pools if "max_cpu" in p]
    assert (capped["name"], capped["max_cpu"], capped["max_ram_gib"]) == ("sls_queue_1", 40.0, 90000 / 1024)
    (policy,) = [w for w in q.warnings if "schedulingPolicy" in w]
    assert "(research.ml): not applied: the emulator schedules every pool with one policy, `drf`" in policy
    assert not [w for w in q.warnings if "maxResources" in w]
    for ignored in ("<aclSubmitApps> (research.ml)", "<user> (allocations)",
                    "<colour (unknown)> (allocations)"):
        assert ignored in text, text
    share = r"queue `research.etl` <minResources>: '25% cpu, 50% memory' is a share"
    with pytest.raises(TraceError, match=share):
        queues.read(path)  # no cluster to take the share of


def test_root_queue_and_fair_policy(tmp_path: Path) -> None:
    path = tmp_path / "q.xml"
    path.write_text('<allocations><queue name="root"><schedulingPolicy>fair</schedulingPolicy>'
                    '<queue name="a"><weight>3</weight></queue></queue></allocations>')
    q = queues.read(path)
    assert pools_of(q) == {"a": ("root", 3.0, 0.0, 0.0)} and q.policy == "drf"
    assert any("`fair` (memory only)" in w for w in q.warnings)


@pytest.mark.parametrize("text, expected", [
    ('<?xml version="1.0"?>\n<!DOCTYPE a [<!ENTITY x "yy">]>\n<allocations/>',
     "line 2: a <!DOCTYPE> declaration"),
    ("<allocations><queue name='a'><weight>heavy</weight></queue></allocations>",
     "queue `a` <weight>: expected a number > 0, got 'heavy'"),
    ("<allocations><queue name='a'><minResources>lots</minResources></queue></allocations>",
     "queue `a` <minResources>: expected `X mb, Y vcores`"),
    ("<allocations><queue name='a.b'/></allocations>", "expected a `name` attribute without dots"),
    ("<allocations><queue name='a'><schedulingPolicy>lottery</schedulingPolicy></queue></allocations>",
     "expected fair, drf or fifo, got 'lottery'"),
    ("<allocations>\n<queue name='a'>\n</allocations>", "line 3 column"),
    ("<configuration/>", "the document element is <configuration>; expected <allocations>"),
    ("<allocations>" + "<queue name='q'>" * 40 + "</queue>" * 40 + "</allocations>",
     "nested more than 32 deep"),
])
def test_bad_files_named(tmp_path: Path, text: str, expected: str) -> None:
    path = tmp_path / "q.xml"
    path.write_text(text)
    with pytest.raises(TraceError) as err:
        queues.read(path)
    assert str(err.value).startswith(str(path)) and expected in str(err.value), str(err.value)


def test_import_with_queues_and_run(tmp_path: Path) -> None:
    xml = tmp_path / "fair-scheduler.xml"
    xml.write_text(ALLOCATIONS.replace("25% cpu, 50% memory", "1024 mb, 1 vcores").replace(
        "<defaultQueueSchedulingPolicy>drf", "<defaultQueueSchedulingPolicy>fifo"))
    out, run = tmp_path / "s.toml", tmp_path / "run"
    assert main(["import", "sls", str(DATA / "sls.json"), "--nodes", str(DATA / "sls-nodes.json"),
                 "--queues", str(xml), "-o", str(out), "--run", str(run)]) == 0
    sc = load_scenario(out)
    assert {p.name: (p.parent, p.weight) for p in sc.workload.pools} == {
        "sls_queue_1": ("root", 2.5), "research": ("root", 0.5), "research.ml": ("research", 1.0),
        "research.etl": ("research", 1.0)}
    assert sc.scheduler.policy == "fifo"  # root's (the default queue policy)
    with (run / "jobs.csv").open() as f:
        assert {r["job_id"]: r["pool"] for r in csv.DictReader(f)} == {"job_1": "sls_queue_1",
                                                                       "job_2": "sls_queue_2"}
    # --policy wins over the file's.
    assert main(["import", "sls", str(DATA / "sls.json"), "--nodes", str(DATA / "sls-nodes.json"),
                 "--queues", str(xml), "--policy", "packing", "-o", str(out)]) == 0
    assert load_scenario(out).scheduler.policy == "packing"
    err = one_error_line(emulator("import", "sls", str(DATA / "sls.json"), "--node-count", "2", "--queues",
                                  "/dev/zero", "-o", "x.toml", cwd=tmp_path))
    assert "/dev/zero: expected a regular file" in err, err


def test_queues_file_in_a_scenario(tmp_path: Path) -> None:
    (tmp_path / "conf").mkdir()
    (tmp_path / "conf" / "fair-scheduler.xml").write_text(ALLOCATIONS)
    sc_file = tmp_path / "s.toml"
    sc_file.write_text("""
[cluster]
nodes = [{count = 4, cpu = 10, ram_gib = 40}]
[run]
duration_s = 60
[scheduler]
policy = "fifo"
[workload]
queues_file = "conf/fair-scheduler.xml"
[[workload.operations]]
name = "a"
pool = "root.research"
cpu = 1
ram_gib = 1
tasks = 1
seconds_mean = 5
""")
    sc = load_scenario(sc_file)  # relative to the scenario file; shares of its 40 cpu / 160 GiB
    pools = {p.name: p for p in sc.workload.pools}
    assert (pools["research.etl"].min_cpu, pools["research.etl"].min_ram_gib) == (10.0, 80.0)
    assert sc.workload.operations[0].pool == "research"  # YARN's full name
    assert sc.scheduler.policy == "fifo"  # the scenario's own
    assert sc.workload.queues_file is None  # replaced by the pools
    sc_file.write_text(sc_file.read_text().replace("conf/fair-scheduler.xml", "nope.xml"))
    with pytest.raises(ScenarioError, match=r"s.toml: at `workload.queues_file`: .*nope.xml: no such file"):
        load_scenario(sc_file)
