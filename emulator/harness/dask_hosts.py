"""Node hosts on a Dask distributed cluster: ``emulator run SCENARIO --cluster ADDRESS``.

The RM side runs in this process exactly as in a local TCP run (``tcprun.run_tcp_scenario``); only
the node hosts move: each slice of nodes (the same ``HostConfig`` a spawned worker gets, with the
shared epoch and the RM's reachable address) becomes one Dask task pinned to one Dask worker
(slices spread round-robin over the workers' threads, never moved to another worker). The task
runs ``host_nodes`` on a fresh event loop on its worker thread, inside the Dask worker process,
so a Dask worker that dies takes its nodes with it: its control connection drops, and the RM side
handles it as any dead worker (a correlated crash the ring must detect, listed in the outcome's
``dead_workers``). The task returns the host's report and, when the run keeps events, its event
log, written here as ``events.worker-N.jsonl`` like a spawned worker's.

Dask is an optional extra (``pip install hbemu[cluster]``): it is imported only here, and only
when a run asks for a cluster.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

import msgspec

from emulator.harness.eventlog import TextSink
from emulator.harness.nodehost import HostConfig, HostReport, host_nodes
from emulator.harness.outcome import RunOutcome
from emulator.harness.runparts import ProgressHook
from emulator.harness.tcprun import run_tcp_scenario
from emulator.scenario.loader import ScenarioError
from emulator.scenario.schema import Scenario
from emulator.time.clock import EpochClock, LoopClock, run, unix_time

if TYPE_CHECKING:
    from distributed import Client, Future

# Wall seconds more before the epoch than a local run gives: the tasks travel through the
# scheduler, and a worker imports the emulator on its first task.
CLUSTER_SETUP_S = 3.0


class ClusterError(ScenarioError):
    """The cluster cannot host this run (unreachable, too few worker threads, Dask missing): the
    user's to fix, reported like a scenario error (exit 2)."""


class ClusterOptions(msgspec.Struct, frozen=True):
    """``address``: the Dask scheduler (``tcp://host:8786``); ``listen``: where the RM serves,
    an address every worker machine can reach (None: the scenario's ``transport.host``/``port``)."""

    address: str
    listen: tuple[str, int] | None = None


def host_slice(raw: bytes, keep_events: bool) -> tuple[bytes, bytes]:
    """The Dask task: one slice of nodes (a JSON ``HostConfig``) hosted on this worker thread until
    the run ends. Returns the JSON ``HostReport`` and the slice's event log (empty unless kept)."""
    cfg = msgspec.json.decode(raw, type=HostConfig)
    if cfg.epoch is not None and unix_time() > cfg.epoch:
        # Too late to be this run's: Dask runs a task again when its worker died, and the run
        # already counts these nodes as crashed (and an overloaded cluster would start them late).
        raise RuntimeError(f"node slice {cfg.worker} started after the run's epoch: not hosted")
    with contextlib.ExitStack() as stack:
        path = None
        if keep_events:
            fd, path = tempfile.mkstemp(prefix=f"hbemu-worker-{cfg.worker}-", suffix=".jsonl")
            os.close(fd)
            stack.callback(os.unlink, path)
            cfg = msgspec.structs.replace(cfg, events_path=path)

        async def go(_: LoopClock) -> HostReport:
            loop = asyncio.get_running_loop()
            epoch = cfg.epoch if cfg.epoch is not None else unix_time()
            return await host_nodes(cfg, EpochClock(loop, cfg.speed, epoch), signals=False)

        report: HostReport = run(go, "realtime", cfg.speed)
        events = Path(path).read_bytes() if path is not None else b""
    return msgspec.json.encode(report), events


def _host_of(address: str) -> str:
    """``tcp://10.0.0.5:41231`` -> ``10.0.0.5`` (a Dask worker's address)."""
    hostport = address.split("://", 1)[-1]
    return hostport.rsplit(":", 1)[0].strip("[]")


def spread(workers: dict[str, int], slices: int) -> list[str]:
    """The worker each slice goes to: round-robin over the workers, each at most as many slices
    as it has threads (a slice holds its thread for the whole run)."""
    order: list[str] = []
    for round_ in range(max(workers.values(), default=0)):
        order += [w for w, threads in sorted(workers.items()) if threads > round_]
    if len(order) < slices:
        raise ClusterError(
            f"the cluster has {len(order)} worker thread(s) and the run needs {slices} "
            "(`transport.workers`: one thread holds one slice of nodes for the whole run): "
            "start more workers or lower transport.workers"
        )
    return order[:slices]


class DaskPlacement:
    """The node hosts of a TCP run as tasks on a Dask cluster (``tcprun.Placement``)."""

    setup_s = CLUSTER_SETUP_S

    def __init__(self, client: Client, workers: dict[str, int], events_dir: Path | None) -> None:
        self.client = client
        self.workers = workers  # address -> threads
        self.events_dir = events_dir
        self.futures: list[Future[tuple[bytes, bytes]]] = []
        self.configs: list[HostConfig] = []
        self.placed: list[str] = []
        self.dead: set[int] = set()
        self._cancels: set[asyncio.Task[Any]] = set()

    async def start(self, configs: list[HostConfig]) -> None:
        placed = spread(self.workers, len(configs))
        # Events are written where the task runs and shipped back; the ring's peer channel
        # listens on the worker machine's own address, where the other machines reach it.
        ours = [
            msgspec.structs.replace(c, events_path=None, peer_host=_host_of(w))
            for c, w in zip(configs, placed, strict=True)
        ]
        futures = await asyncio.to_thread(self._submit, ours, placed, self.events_dir is not None)
        self.configs, self.placed, self.futures = ours, placed, futures

    def _submit(
        self, configs: list[HostConfig], placed: list[str], keep: bool
    ) -> list[Future[tuple[bytes, bytes]]]:
        return [
            self.client.submit(
                host_slice, msgspec.json.encode(c), keep, key=f"hbemu-slice-{c.worker}-{os.urandom(4).hex()}",
                workers=[w], allow_other_workers=False, pure=False,
            )
            for c, w in zip(configs, placed, strict=True)
        ]

    def lost(self, worker: int) -> None:
        # Its task must not run again on another worker (or on the restarted one).
        self.dead.add(worker)
        for c, fut in zip(self.configs, self.futures, strict=True):
            if c.worker == worker:
                task = asyncio.ensure_future(asyncio.to_thread(fut.cancel))
                self._cancels.add(task)
                task.add_done_callback(self._cancels.discard)

    async def collect(self, timeout_s: float) -> list[HostReport | None]:
        return await asyncio.to_thread(self._collect, timeout_s)

    def _collect(self, timeout_s: float) -> list[HostReport | None]:
        out: list[HostReport | None] = []
        for c, where, fut in zip(self.configs, self.placed, self.futures, strict=True):
            if c.worker in self.dead:
                out.append(None)
                continue
            try:
                raw, events = fut.result(timeout=timeout_s)
            except (Exception, asyncio.CancelledError) as err:  # died, cancelled, failed, or late
                fut.cancel()  # type: ignore[no-untyped-call]
                print(f"cluster: node slice {c.worker} on {where}: no report ({err!r})",
                      file=sys.stderr)
                out.append(None)
                continue
            if self.events_dir is not None and events:
                (self.events_dir / f"events.worker-{c.worker}.jsonl").write_bytes(events)
            out.append(msgspec.json.decode(raw, type=HostReport))
        return out

    async def close(self) -> None:
        if self._cancels:
            await asyncio.gather(*self._cancels, return_exceptions=True)
        pending = [f for f in self.futures if not f.done()]  # type: ignore[no-untyped-call]
        if pending:
            await asyncio.to_thread(self.client.cancel, pending)


def connect(address: str, timeout_s: float = 10.0) -> Client:
    try:
        from distributed import Client
    except ImportError:
        raise ClusterError("--cluster needs Dask distributed: pip install 'hbemu[cluster]'") from None
    try:
        return Client(address, timeout=timeout_s)  # type: ignore[no-untyped-call]
    except OSError as err:
        raise ClusterError(f"--cluster {address}: no Dask scheduler reachable there: {err}") from None


def workers_of(client: Client) -> dict[str, int]:
    """The cluster's workers now: address -> threads."""
    info = client.scheduler_info(n_workers=-1)
    return {addr: int(w.get("nthreads", 1)) for addr, w in info["workers"].items()}


async def run_on_cluster(
    scenario: Scenario,
    options: ClusterOptions,
    events: TextSink | None,
    events_dir: Path | None,
    progress: ProgressHook | None = None,
    check_invariants: bool | None = None,
) -> RunOutcome:
    client = await asyncio.to_thread(connect, options.address)
    try:
        workers = await asyncio.to_thread(workers_of, client)
        # Enough threads? Say so before anything starts.
        spread(workers, scenario.transport.worker_processes())
        placement = DaskPlacement(client, workers, events_dir)
        return await run_tcp_scenario(
            scenario, events, events_dir, progress, check_invariants, placement=placement,
            listen=options.listen,
        )
    finally:
        await asyncio.to_thread(client.close)


def run_cluster_blocking(
    scenario: Scenario, options: ClusterOptions, events_path: Path | None = None,
    check_invariants: bool | None = None, progress: ProgressHook | None = None,
) -> RunOutcome:
    async def main(_: LoopClock) -> RunOutcome:
        if events_path is None:
            return await run_on_cluster(scenario, options, None, None, progress, check_invariants)
        with events_path.open("w", encoding="utf-8") as sink:
            return await run_on_cluster(
                scenario, options, sink, events_path.parent, progress, check_invariants
            )

    result: RunOutcome = run(main, "realtime", scenario.run.speed)
    return result
