"""A Borg cell's memory over days (E4; design.md §3b, issue 33): hard-limit, soft-limit,
Autopilot and ML-recommended jobs in 5-minute windows, their slack and OOMs beside the lecture's."""

from emulator.models.overcommit.config import E4Config
from emulator.models.overcommit.report import (
    markdown_table,
    modes_table,
    run_point,
    variants_table,
    why_table,
)

__all__ = ["E4Config", "markdown_table", "modes_table", "run_point", "variants_table", "why_table"]
