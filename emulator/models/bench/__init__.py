"""The bench: the emulator's own speed and memory (scenarios/studies/bench.toml runs the model),
and the measurements behind docs/scale.md and the footprint constants (``efficiency``: the RM's
cost per heartbeat next to the floor; ``memcal``: peak RSS per node, task and container)."""

from emulator.models.bench.model import BenchParams, run_point
from emulator.models.bench.report import NotBench, markdown_table, report_of, table

__all__ = ["BenchParams", "NotBench", "markdown_table", "report_of", "run_point", "table"]
