"""Models a study runs instead of a scenario (docs/studies.md, "Model studies"): engines that are
not emulator runs. ``overcommit``: a Borg cell of memory limits, reservations and Autopilot over
days of 5-minute windows (E4). ``binpacking``: stochastic bin packing by admission method, on
synthetic and on trace-like demand (E5). Each takes a typed parameter struct and a seed and
returns a plain result dict; their tables render from a study's points (``ModelPoint``)."""
