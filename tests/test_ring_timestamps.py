"""Ring liveness as a timestamp (the default in memory) decides exactly as liveness messages do:
the E3 crash, rack and stall scenarios, shrunk, give byte-identical event logs and removals."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from emulator.harness.runner import run_blocking
from emulator.scenario.loader import load_scenario

SCENARIOS = Path(__file__).resolve().parent.parent / "scenarios"
NODES = 300

SHRUNK: dict[str, dict[str, Any]] = {
    "e3-crash": {"run": {"duration_s": 480.0}},
    "e3-rack": {"run": {"duration_s": 260.0}, "faults": [
        {"kind": "crash", "at_s": 200, "count": 12, "consecutive": True, "first_id": 100}]},
    "e3-stalls": {"run": {"duration_s": 300.0}},
}


def _run(name: str, detector: str, liveness: str, tmp: Path) -> tuple[bytes, Any, Any]:
    overrides = {
        **SHRUNK[name],
        "cluster": {"nodes": [{"count": NODES, "cpu": 20, "ram_gib": 40}]},
        "ring": {"detector": detector},
        "transport": {"ring_liveness": liveness},
    }
    scenario = load_scenario(SCENARIOS / f"{name}.toml", overrides)
    events = tmp / f"{name}-{detector}-{liveness}.jsonl"
    outcome = run_blocking(scenario, events)
    return events.read_bytes(), outcome.removal_log, outcome.ring


@pytest.mark.parametrize("detector", ["kring", "ring"])
@pytest.mark.parametrize("name", sorted(SHRUNK))
def test_timestamps_decide_as_messages_do(name: str, detector: str, tmp_path: Path) -> None:
    events, removals, ring = _run(name, detector, "timestamps", tmp_path)
    m_events, m_removals, m_ring = _run(name, detector, "messages", tmp_path)
    assert removals == m_removals
    assert events == m_events
    assert ring.reports_sent == m_ring.reports_sent
    assert ring.liveness_sent == m_ring.liveness_sent
    if name != "e3-stalls":
        assert removals, "the scenario must remove someone, or it decides nothing"
