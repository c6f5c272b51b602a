"""`emulator nodes`' progress bar: emulated time from the clock it shares with the RM (start and
speed), against the duration, then "collecting reports"; without a duration, the time alone."""

from __future__ import annotations

from rich.console import Console

from emulator.cli.nodes_progress import NodesProgress
from emulator.harness.nodehost import HostConfig, NodeSpec
from nodemanager.config import HeartbeatConfig
from rm.protocol import Resources


def configs(duration_s: float | None) -> list[HostConfig]:
    node = NodeSpec("n-0", Resources(4, 8), 0.0)
    return [HostConfig(host="127.0.0.1", port=9, nodes=[node] * n, heartbeat=HeartbeatConfig(),
                       speed=2.0, epoch=100.0, duration_s=duration_s, seed=i) for i, n in enumerate((3, 2))]


def bar_line(console: Console) -> str:
    (line,) = [x for x in console.export_text(clear=False).splitlines() if "nodes in" in x]
    return line


def test_the_bar_follows_the_shared_clock_to_the_end() -> None:
    wall = [110.0]
    console = Console(record=True, width=200, force_terminal=False)
    with NodesProgress(configs(60.0), console, lambda: wall[0]) as bar:
        assert bar.emulated_now() == 20.0  # 10 wall s since the start at speed 2
        wall[0] = 200.0  # past the end: the workers are sending their reports
    line = bar_line(console)
    assert line.startswith("collecting reports") and "t=60/60s" in line and "5 nodes in 2 workers" in line


def test_without_a_duration_it_shows_the_emulated_time() -> None:
    console = Console(record=True, width=200, force_terminal=False)
    with NodesProgress(configs(None), console, lambda: 130.0):
        pass
    line = bar_line(console)
    assert line.startswith("emulating") and "t=60s" in line and "/" not in line.split("t=")[1].split()[0]
