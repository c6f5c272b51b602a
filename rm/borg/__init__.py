"""The Borg lecture's layer: priority tiers, placement with stochastic bin packing, task usage, Autopilot."""
