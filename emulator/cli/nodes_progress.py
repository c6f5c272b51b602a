"""`emulator nodes`' progress, and where its results are. Its workers run in other processes
and report only at the end, so the bar follows the emulated clock they share with the RM
(``--start-at`` and ``--speed``: t = (now − start) × speed) against ``--duration``, with an ETA;
then "collecting reports" until every worker has reported. Without a duration it shows the
emulated time only (until Ctrl-C)."""

from __future__ import annotations

import threading
from collections.abc import Callable

from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

from emulator.harness.nodehost import HostConfig

# Seconds between redraws (wall).
REFRESH_S = 0.5


class NodesProgress:
    def __init__(self, configs: list[HostConfig], console: Console, unix_time: Callable[[], float]) -> None:
        """``unix_time``: the wall clock the workers' emulated clock is anchored to."""
        first = configs[0]
        self._now = unix_time
        self._speed = first.speed
        # No --start-at: each worker's t = 0 is when it starts, about now.
        self._epoch = first.epoch if first.epoch is not None else unix_time()
        self._total = first.duration_s
        nodes = sum(len(c.nodes) for c in configs)
        self._what = f"{nodes:,} nodes in {len(configs)} worker{'s' if len(configs) != 1 else ''}"
        columns = [TextColumn("[bold]{task.description}"), BarColumn() if self._total else TextColumn("")]
        span = "t={task.completed:,.0f}/{task.total:,.0f}s" if self._total else "t={task.completed:,.0f}s"
        self._progress = Progress(
            *columns, TextColumn(span), TextColumn(self._what), TimeElapsedColumn(),
            *([TimeRemainingColumn()] if self._total else []),
            console=console, transient=False,
        )
        self._task = self._progress.add_task("emulating", total=self._total)
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._follow, name="nodes-progress", daemon=True)

    def emulated_now(self) -> float:
        t = max(0.0, (self._now() - self._epoch) * self._speed)
        return min(t, self._total) if self._total else t

    def tick(self) -> None:
        t = self.emulated_now()
        if self._total and t >= self._total:
            self._progress.update(self._task, completed=t, description="collecting reports")
        else:
            self._progress.update(self._task, completed=t)

    def _follow(self) -> None:
        while not self._done.wait(REFRESH_S):
            self.tick()

    def __enter__(self) -> NodesProgress:
        self._progress.start()
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._done.set()
        self._thread.join()
        self.tick()
        self._progress.stop()


def where_results(rm: str, report: str | None) -> str:
    """The last line of `emulator nodes`: the run's results are the RM's; this process keeps its
    workers' counters."""
    kept = report or "the table above (--report PATH also writes them as JSON)"
    return (f"results: the run's are written by the RM at {rm}, in its results directory "
            f"(`emulator rm` printed it); these workers' counters: {kept}")
