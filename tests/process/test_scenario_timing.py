"""The ring's timeouts against the scenario's delays: a probe or ping that cannot come back within
its configured timeout (transport latency, message-delay faults) is named in a note, and the run
derives the effective timeout from the round trips it measures, so no live node is removed
(e3-stalls with `transport.latency_s = 0.35` once lost 160 of 200 nodes)."""

from __future__ import annotations

from typing import Any

import pytest

from emulator.harness.runner import run_blocking
from emulator.results.summary import build_summary
from emulator.scenario.checks import timing_notes
from emulator.scenario.loader import scenario_from_dict


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


def notes(doc: dict[str, Any]) -> str:
    return "\n".join(f"at `{n.path}`: {n.message}" for n in timing_notes(scenario_from_dict(doc, "s.toml")))


def test_latency_longer_than_the_probe_timeout_is_named_with_the_fields() -> None:
    text = notes(ring_doc(transport={"latency_s": 0.35}))
    assert text.startswith("at `ring.probe_timeout`: 0.2 intervals (0.6 s at `ring.interval_s` = 3)")
    assert "a probe's round trip, 0.7 s (2 × `transport.latency_s`)" in text
    assert "`ring.probe_timeout` >= 0.234" in text
    assert "at `ring.ping_timeout`: 0.1 intervals (0.3 s" in text


def test_message_delay_faults_count_when_they_hit_probes() -> None:
    delay = {"kind": "messages", "at_s": 10, "duration_s": 60, "delay_s": 1.0}
    text = notes(ring_doc(faults=[delay]))
    assert "at `ring.probe_timeout`" in text
    assert "2 s (`faults[0].delay_s` + `faults[0].delay_s`)" in text
    # Delays on other messages, or a long enough probe timeout, need no note.
    assert notes(ring_doc(faults=[{**delay, "types": ["Heartbeat", "HeartbeatResponse"]}])) == ""
    assert notes(ring_doc(faults=[{**delay, "types": ["Probe"]}], ring={"probe_timeout": 0.34})) == ""
    assert notes(ring_doc(faults=[delay], ring={"probe_timeout": 0.67})) == ""


def test_the_paper_ring_and_a_ring_that_is_off_time_nothing_out() -> None:
    assert notes(ring_doc(transport={"latency_s": 0.35}, ring={"detector": "ring"})) == ""
    assert notes(ring_doc(transport={"latency_s": 0.35}, heartbeat={"mode": "periodic"})) == ""


def test_validate_prints_the_note_and_accepts_the_scenario() -> None:
    import subprocess
    import sys

    out = subprocess.run(
        [sys.executable, "-m", "emulator", "validate", "scenarios/e3-stalls.toml",
         "--set", "transport.latency_s=0.35"],
        capture_output=True, text=True, timeout=60,
    )
    assert out.returncode == 0, out.stderr
    assert "note: scenarios/e3-stalls.toml: at `ring.probe_timeout`" in out.stderr


@pytest.mark.parametrize("probe_timeout", [0.2, 0.234])
def test_under_latency_no_live_node_is_removed(probe_timeout: float) -> None:
    """Lost liveness makes watchers report their predecessors; the RM's probes come back 0.7 s
    later. With the configured 0.6 s (0.2 intervals) the measured round trip extends the wait."""
    loss = {"kind": "liveness_loss", "at_s": 60, "fraction": 0.5, "duration_s": 60}
    sc = scenario_from_dict(ring_doc(transport={"latency_s": 0.35}, faults=[loss],
                                     ring={"probe_timeout": probe_timeout}))
    out = run_blocking(sc, check_invariants=True)
    summary = build_summary(out)
    assert summary["ring_probes"] > 0 and summary["ring_refuted"] > 0
    assert summary["nodes_lost"] == 0 and summary["false_removals"] == 0
