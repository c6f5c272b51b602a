"""The ring's timeouts against the scenario's delays: a probe or ping that cannot come back in time
(transport latency, message-delay faults) is refused at validation, naming the fields, instead of
removing live nodes mid-run (e3-stalls with `transport.latency_s = 0.35` lost 160 of 200 nodes)."""

from __future__ import annotations

from typing import Any

import pytest

from emulator.harness.runner import run_blocking
from emulator.results.summary import build_summary
from emulator.scenario.loader import ScenarioError, scenario_from_dict


def ring_doc(**sections: Any) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "cluster": {"nodes": [{"count": 40, "cpu": 8, "ram_gib": 16}]},
        "heartbeat": {"mode": "delta", "interval_s": 3.0},
        "workload": {"operations": [
            {"name": "a", "cpu": 1, "ram_gib": 2, "tasks": 200, "seconds_mean": 20, "loop": True},
        ]},
        "run": {"duration_s": 300, "seed": 2},
    }
    doc.update(sections)
    return doc


def refusal(doc: dict[str, Any]) -> str:
    with pytest.raises(ScenarioError) as err:
        scenario_from_dict(doc, "s.toml")
    return str(err.value)


def test_latency_longer_than_the_probe_timeout_is_refused_naming_the_fields() -> None:
    text = refusal(ring_doc(transport={"latency_s": 0.35}))
    assert text.startswith("s.toml: at `ring.probe_timeout`: 0.2 intervals (0.6 s at `ring.interval_s` = 3)")
    assert "a probe's round trip, 0.7 s (2 × `transport.latency_s`)" in text
    assert "expected `ring.probe_timeout` >= 0.234" in text


def test_the_ping_timeout_is_checked_too() -> None:
    text = refusal(ring_doc(transport={"latency_s": 0.35}, ring={"probe_timeout": 0.234}))
    assert "at `ring.ping_timeout`: 0.1 intervals (0.3 s" in text
    assert "expected `ring.ping_timeout` >= 0.234" in text


def test_message_delay_faults_count_when_they_hit_probes() -> None:
    delay = {"kind": "messages", "at_s": 10, "duration_s": 60, "delay_s": 1.0}
    text = refusal(ring_doc(faults=[delay]))
    assert "at `ring.probe_timeout`" in text
    assert "2 s (`faults[0].delay_s` + `faults[0].delay_s`)" in text
    # Delays on other messages, or a long enough probe timeout, are fine.
    scenario_from_dict(ring_doc(faults=[{**delay, "types": ["Heartbeat", "HeartbeatResponse"]}]))
    scenario_from_dict(ring_doc(faults=[{**delay, "types": ["Probe"]}], ring={"probe_timeout": 0.34}))
    scenario_from_dict(ring_doc(faults=[delay], ring={"probe_timeout": 0.67}))


def test_the_paper_ring_and_a_ring_that_is_off_time_nothing_out() -> None:
    scenario_from_dict(ring_doc(transport={"latency_s": 0.35}, ring={"detector": "ring"}))
    scenario_from_dict(ring_doc(transport={"latency_s": 0.35}, heartbeat={"mode": "periodic"}))


def test_with_the_timeouts_it_asks_for_no_live_node_is_removed() -> None:
    """Lost liveness makes watchers report their predecessors; the RM's probes, with the latency,
    still come back in time (at 0.2 intervals the same run removed live nodes 57 times)."""
    loss = {"kind": "liveness_loss", "at_s": 60, "fraction": 0.5, "duration_s": 60}
    sc = scenario_from_dict(ring_doc(transport={"latency_s": 0.35}, faults=[loss],
                                     ring={"probe_timeout": 0.234, "ping_timeout": 0.234}))
    out = run_blocking(sc, check_invariants=True)
    summary = build_summary(out)
    assert summary["ring_probes"] > 0 and summary["ring_refuted"] > 0
    assert summary["nodes_lost"] == 0 and summary["false_removals"] == 0
