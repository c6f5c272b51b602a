"""Models a study runs instead of a scenario (docs/studies.md, "Model studies"). ``overcommit``: a
Borg cell of memory limits, reservations and Autopilot over days of 5-minute windows (E4).
``binpacking``: stochastic bin packing by admission method, on synthetic and on trace-like demand
(E5). ``bench``: the emulator's own speed, floor and memory per NodeManager; it runs the emulator
itself, so this layer sits above the harness. Each takes a typed parameter struct and a seed and
returns a plain result dict; their tables render from a study's points (``ModelPoint``)."""
