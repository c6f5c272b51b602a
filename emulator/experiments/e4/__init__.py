"""E4: Autopilot as the Borg lecture measured it (design.md §3b, issue 33): a Borg cell of
hard-limit, soft-limit, Autopilot and ML-recommended jobs over days of 5-minute windows."""

from emulator.experiments.e4.config import E4Config
from emulator.experiments.e4.report import add_command, markdown_table, run_e4, variants_table

__all__ = ["E4Config", "add_command", "markdown_table", "run_e4", "variants_table"]
