"""The node hosts' configurations for a scenario: one builder for every way nodes are hosted.

An in-process TCP run (``emulator run``, ``transport.kind = "tcp"``) and the standalone topology
(``emulator nodes --scenario`` against ``emulator rm``) host the same nodes the same way: with the
ring on, every host carries ring liveness on a peer endpoint. A host without it would leave a
delta-mode RM no watcher to hear from, so it would remove live nodes of a quiet cluster and miss
a hung one.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from emulator.harness.nodehost import HostConfig, NodeSpec
from emulator.scenario.schema import MessageFault, Scenario
from emulator.scenario.topology import node_specs, phases


class NodeRangeError(ValueError):
    """The nodes asked for are not all in the scenario."""


def split(items: list[Any], parts: int) -> list[list[Any]]:
    """Contiguous, nearly equal slices (worker i hosts slice i)."""
    k, r = divmod(len(items), parts)
    out, start = [], 0
    for i in range(parts):
        stop = start + k + (1 if i < r else 0)
        out.append(items[start:stop])
        start = stop
    return out


def host_configs(
    scenario: Scenario, host: str, port: int, workers: int, epoch: float | None, events_dir: Path | None,
    control: str | None = None, *, first: int = 0, count: int | None = None,
    credentials: str | None = None, duration_s: float | None = None, peer_host: str | None = None,
) -> list[HostConfig]:
    """The configs of ``workers`` hosts for the scenario's nodes ``first`` .. ``first + count``
    (default: all), reaching the RM at ``host:port``. ``credentials``, ``duration_s``,
    ``peer_host``: instead of the scenario's secret, ``run.duration_s`` and ``transport.host``."""
    addresses = node_specs(scenario)
    stop = len(addresses) if count is None else first + count
    if first < 0 or stop > len(addresses):
        raise NodeRangeError(f"nodes {first}..{stop - 1} asked for; the scenario has {len(addresses)} "
                             f"(0..{len(addresses) - 1})")
    specs = [
        NodeSpec(addr, res, phase)
        for (addr, res), phase in zip(addresses[first:stop], phases(scenario, len(addresses))[first:stop],
                                      strict=True)
    ]
    faults = [f for f in scenario.faults if isinstance(f, MessageFault)]
    return [
        HostConfig(
            host=host, port=port, nodes=chunk, heartbeat=scenario.heartbeat,
            credentials=scenario.rm.credentials if credentials is None else credentials,
            speed=scenario.run.speed, epoch=epoch,
            duration_s=scenario.run.duration_s if duration_s is None else duration_s,
            sample_interval_s=scenario.sample_interval_s, measure_from_s=scenario.run.warmup_s,
            seed=scenario.run.seed + first + i,  # hosts of one run back off differently
            max_frame_bytes=scenario.transport.max_frame_bytes,
            events_path=str(events_dir / f"events.worker-{i}.jsonl") if events_dir else None,
            ring=scenario.ring if scenario.ring_enabled else None,
            peer_host=scenario.transport.host if peer_host is None else peer_host,
            control=control, worker=i, message_faults=faults,
        )
        for i, chunk in enumerate(split(specs, workers))
        if chunk
    ]
