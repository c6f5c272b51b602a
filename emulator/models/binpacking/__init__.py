"""Stochastic bin packing (E5; design.md §3b): tasks placed best-fit by each admission method of
rm/borg/sbp.py and judged on their future usage. ``offline``: synthetic tasks drawn by the
emulator's usage processes, and the classic bin-packing baselines; ``demand``: trace-like demand
calibrated to the Google trace's published properties; ``arrays``: the admission test and the
per-machine judgment on arrays; ``cluster``: the packing on that demand, judged machine by machine."""
