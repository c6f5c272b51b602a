"""A served run stops cleanly at its end: nodes stopped, the run's clock frozen, the event file
closed only after that, nothing happening while the page lingers on the final state."""

from __future__ import annotations

import asyncio
from pathlib import Path

import msgspec
import pytest

from emulator.web.events import EventBuffer, EventTap
from emulator.web.serve import serve_scenario
from emulator.web.state import LiveRun
from tests.webrun import small_scenario


def test_a_closed_tap_drops_late_lines_instead_of_raising(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    tap = EventTap(EventBuffer(), path.open("w", encoding="utf-8"))
    tap.write('{"t": 1.0, "event": "a"}\n')
    tap.close()
    tap.write('{"t": 2.0, "event": "late"}\n')  # was: ValueError: I/O operation on closed file
    assert tap.dropped == 1
    assert path.read_text().splitlines() == ['{"t": 1.0, "event": "a"}']


@pytest.mark.asyncio
async def test_the_cluster_stops_when_the_run_ends(tmp_path: Path) -> None:
    # 40 nodes whose expiry (6 s) is far shorter than the linger at 20x (2 s wall = 40 emulated s):
    # were the RM or the nodes still running, nodes would expire and be logged as lost.
    scenario = small_scenario(nodes=40, duration_s=20.0, speed=20.0)
    live = LiveRun(scenario)
    events = tmp_path / "events.jsonl"
    seen: list[int] = []

    def finished(_outcome: object, run: LiveRun) -> None:
        seen.append(run.events.total)

    async with asyncio.timeout(30):
        outcome, _ = await serve_scenario(scenario, "127.0.0.1", 0, events_path=events, live=live,
                                          linger_s=2.0, on_finished=finished)
    assert not outcome.partial
    assert live.run is not None and live.clock is not None
    assert live.clock.paused  # no timer of the run fires after its end
    # Nothing logged while lingering, nothing written late, and the file ends with the run.
    assert live.events.total == seen[0]
    assert not any(e["event"] == "run.late_events_dropped" for e in live.events.since(0, limit=5000))
    names = [msgspec.json.decode(line)["event"] for line in events.read_bytes().splitlines()]
    end = names.index("run.finished")
    # After the end only the end-of-run check may speak; no node was lost.
    assert all(n.startswith("invariants.") for n in names[end + 1:]), names[end + 1:]
    assert "node.lost" not in names
