"""The Resource Manager's public face: what the harness (``emulator``) and a plug-in policy import.

One module is public besides: ``rm.protocol``, the messages between nodes and the RM (the
NodeManager's only view of the RM), and nothing else; every other module is the RM's own, in
rooms that say what they hold (docs/architecture.md): ``shell`` (the ResourceManager and one
life of it), ``tracker``, ``membership``, ``recovery``, ``views``, ``borg``, ``scheduler``
(``scheduler/policies``: the built-in policies), ``queues`` (the dispatcher, inbound admission,
the outbox) and ``state``. An import-linter contract (pyproject.toml) holds the harness to this
face.

The names resolve when first asked for (``from rm import ResourceManager``): a process that only
speaks the protocol (a NodeManager host imports ``rm.protocol``, which runs this file first)
does not load the whole RM.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rm.borg import sbp as sbp
    from rm.config import (
        SERVICE_TIME_PRESETS as SERVICE_TIME_PRESETS,
    )
    from rm.config import (
        RMConfig as RMConfig,
    )
    from rm.plugins import (
        PluginError as PluginError,
    )
    from rm.plugins import (
        discover as discover,
    )
    from rm.plugins import (
        installed as installed,
    )
    from rm.ports import (
        Clock as Clock,
    )
    from rm.ports import (
        Link as Link,
    )
    from rm.ports import (
        Log as Log,
    )
    from rm.ports import (
        Timer as Timer,
    )
    from rm.queues.dispatcher import (
        Dispatcher as Dispatcher,
    )
    from rm.queues.dispatcher import (
        Handler as Handler,
    )
    from rm.queues.histogram import (
        LogHistogram as LogHistogram,
    )
    from rm.queues.logbudget import (
        LogBudget as LogBudget,
    )
    from rm.recovery.journal import (
        Journal as Journal,
    )
    from rm.recovery.journal import (
        JournalCorrupt as JournalCorrupt,
    )
    from rm.recovery.journal import (
        JournalWriteFailed as JournalWriteFailed,
    )
    from rm.recovery.journal import (
        Totals as Totals,
    )
    from rm.recovery.restart import (
        Recovery as Recovery,
    )
    from rm.scheduler.borg_config import (
        TierName as TierName,
    )
    from rm.scheduler.config import (
        SchedulerConfig as SchedulerConfig,
    )
    from rm.scheduler.loop import (
        NodeUpdate as NodeUpdate,
    )
    from rm.scheduler.loop import (
        SchedulerItem as SchedulerItem,
    )
    from rm.scheduler.policy import (
        NoParams as NoParams,
    )
    from rm.scheduler.policy import (
        Policy as Policy,
    )
    from rm.scheduler.policy import (
        PolicyBase as PolicyBase,
    )
    from rm.scheduler.policy import (
        PolicyCounters as PolicyCounters,
    )
    from rm.scheduler.policy import (
        RegisteredPolicy as RegisteredPolicy,
    )
    from rm.scheduler.registry import (
        ParamsError as ParamsError,
    )
    from rm.scheduler.registry import (
        decode_params as decode_params,
    )
    from rm.scheduler.registry import (
        load_policy as load_policy,
    )
    from rm.scheduler.registry import (
        policies as policies,
    )
    from rm.shell.manager import (
        Inbound as Inbound,
    )
    from rm.shell.manager import (
        ResourceManager as ResourceManager,
    )
    from rm.shell.manager import (
        RMUnavailable as RMUnavailable,
    )
    from rm.state.cluster import (
        EPS as EPS,
    )
    from rm.state.cluster import (
        Cluster as Cluster,
    )
    from rm.state.cluster import (
        NodeRecord as NodeRecord,
    )
    from rm.state.operations import (
        Operation as Operation,
    )
    from rm.state.operations import (
        OperationSpec as OperationSpec,
    )
    from rm.state.operations import (
        Pool as Pool,
    )
    from rm.views.observer import (
        NodeEvent as NodeEvent,
    )
    from rm.views.observer import (
        OperationEvent as OperationEvent,
    )
    from rm.views.observer import (
        RMObserver as RMObserver,
    )
    from rm.views.observer import (
        TaskCompleted as TaskCompleted,
    )
    from rm.views.observer import (
        TaskStarted as TaskStarted,
    )
    from rm.views.pending_reasons import (
        PendingReasons as PendingReasons,
    )
    from rm.views.snapshot import (
        NodeView as NodeView,
    )
    from rm.views.snapshot import (
        OperationView as OperationView,
    )
    from rm.views.snapshot import (
        PoolView as PoolView,
    )
    from rm.views.snapshot import (
        RingSnapshot as RingSnapshot,
    )
    from rm.views.snapshot import (
        RMSnapshot as RMSnapshot,
    )
    from rm.views.snapshot import (
        SharesSnapshot as SharesSnapshot,
    )

# Name -> the module that defines it.
_WHERE: dict[str, str] = {
    "Inbound": "rm.shell.manager",
    "RMUnavailable": "rm.shell.manager",
    "ResourceManager": "rm.shell.manager",
    "RMConfig": "rm.config",
    "SERVICE_TIME_PRESETS": "rm.config",
    "SchedulerConfig": "rm.scheduler.config",
    "TierName": "rm.scheduler.borg_config",
    "Clock": "rm.ports",
    "Link": "rm.ports",
    "Log": "rm.ports",
    "Timer": "rm.ports",
    "Dispatcher": "rm.queues.dispatcher",
    "Handler": "rm.queues.dispatcher",
    "LogHistogram": "rm.queues.histogram",
    "LogBudget": "rm.queues.logbudget",
    "Journal": "rm.recovery.journal",
    "JournalCorrupt": "rm.recovery.journal",
    "JournalWriteFailed": "rm.recovery.journal",
    "Totals": "rm.recovery.journal",
    "Recovery": "rm.recovery.restart",
    "NodeUpdate": "rm.scheduler.loop",
    "SchedulerItem": "rm.scheduler.loop",
    "PluginError": "rm.plugins",
    "discover": "rm.plugins",
    "installed": "rm.plugins",
    "ParamsError": "rm.scheduler.registry",
    "decode_params": "rm.scheduler.registry",
    "load_policy": "rm.scheduler.registry",
    "policies": "rm.scheduler.registry",
    "NoParams": "rm.scheduler.policy",
    "Policy": "rm.scheduler.policy",
    "PolicyBase": "rm.scheduler.policy",
    "PolicyCounters": "rm.scheduler.policy",
    "RegisteredPolicy": "rm.scheduler.policy",
    "EPS": "rm.state.cluster",
    "Cluster": "rm.state.cluster",
    "NodeRecord": "rm.state.cluster",
    "Operation": "rm.state.operations",
    "OperationSpec": "rm.state.operations",
    "Pool": "rm.state.operations",
    "NodeEvent": "rm.views.observer",
    "OperationEvent": "rm.views.observer",
    "RMObserver": "rm.views.observer",
    "TaskCompleted": "rm.views.observer",
    "TaskStarted": "rm.views.observer",
    "PendingReasons": "rm.views.pending_reasons",
    "NodeView": "rm.views.snapshot",
    "OperationView": "rm.views.snapshot",
    "PoolView": "rm.views.snapshot",
    "RMSnapshot": "rm.views.snapshot",
    "RingSnapshot": "rm.views.snapshot",
    "SharesSnapshot": "rm.views.snapshot",
}
# Modules the face hands out whole (the stochastic-bin-packing tests, for the offline E5 runs).
_MODULES: dict[str, str] = {
    "sbp": "rm.borg.sbp",
}

__all__ = sorted([*_WHERE, *_MODULES])


def __getattr__(name: str) -> object:
    module = _MODULES.get(name)
    if module is not None:
        return importlib.import_module(module)
    where = _WHERE.get(name)
    if where is None:
        raise AttributeError(f"module 'rm' has no attribute {name!r} (its public names: rm.__all__)")
    return getattr(importlib.import_module(where), name)
