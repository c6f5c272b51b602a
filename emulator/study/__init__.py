"""Studies as data: a TOML file names a base scenario, variants (``--set``-style overrides), axes
(seeds, node counts, any field), the registry metrics to collect and the tables to render;
`emulator study` runs its points in parallel processes into one resumable JSON (docs/studies.md)."""
