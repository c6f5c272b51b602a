"""Scheduling: the policy interface and registry, the scheduling loop, fair shares and preemption;
the built-in policies in ``policies/``."""
