"""The cluster scheduler emulator (hbemu). The Python API (docs/api.md)::

    import emulator
    result = emulator.run("scenarios/quickstart.toml", seed=3)

Names are imported on first use, so ``import emulator`` stays light.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from emulator.api import Result, Table, load, run, run_async
    from emulator.harness.invariants import InvariantViolation
    from emulator.scenario.loader import ScenarioError

__all__ = ["InvariantViolation", "Result", "ScenarioError", "Table", "load", "run", "run_async"]

_API = ("Result", "Table", "load", "run", "run_async")


def __getattr__(name: str) -> Any:
    if name in _API:
        from emulator import api

        return getattr(api, name)
    if name == "ScenarioError":
        from emulator.scenario.loader import ScenarioError

        return ScenarioError
    if name == "InvariantViolation":
        from emulator.harness.invariants import InvariantViolation

        return InvariantViolation
    raise AttributeError(f"module 'emulator' has no attribute {name!r}")
