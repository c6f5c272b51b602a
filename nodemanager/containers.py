"""The containers a node runs: launching (or refusing one that does not fit), their completions
(a heap with one timer), kills, and the usage model's sampling (OOM kills, throttled containers
re-timed)."""

from __future__ import annotations

import heapq
import math

from nodemanager.state import EPS, DueAt, NodeFields, NodeState, time_then_id
from nodemanager.usage import NodeUsage
from rm.protocol import EXIT_OOM, EXIT_REJECTED, EXIT_SUCCESS, ContainerLaunch, ContainerStatus


class ContainerRuntime(NodeFields):
    """Part of ``NodeManager`` (nodemanager/node.py)."""

    __slots__ = ()

    def _sample_usage(self) -> None:
        """The usage timer: draw usage, OOM-kill, re-time throttled containers, mark reports."""
        self._usage_timer = None
        usage = self._usage
        if self.state is NodeState.STOPPED or usage is None or not usage.containers:
            return
        result = usage.sample(self._clock.now())
        for cid, _ in result.ooms:
            self._unschedule(cid)
            self._release(cid, EXIT_OOM)
        for cid, delay in result.retime.items():
            if cid in self._containers:
                self._unschedule(cid)
                self._schedule_finish(cid, delay)
        if result.moved and self._config.mode == "delta":
            usage.dirty.update(result.moved)
            self._touch()
        self._arm_usage()

    def _arm_usage(self) -> None:
        if self._usage_timer is None and self._usage is not None and self._usage.containers:
            self._usage_timer = self._clock.call_later(self._config.usage_sample_s, self._sample_usage)

    def _launch(self, launch: ContainerLaunch) -> None:
        cid = launch.container_id
        if cid in self._containers or cid in self._changes:
            return  # duplicate command
        res = launch.resources
        room = self._config.overcommit
        if (
            self._used_cpu + res.cpu > self.resources.cpu * room + EPS
            or self._used_ram + res.ram_gib > self.resources.ram_gib * room + EPS
        ):
            self._stats.containers_rejected += 1
            self._changes[cid] = ContainerStatus(cid, "complete", EXIT_REJECTED)
            self._statuses = None
            self._touch()
            return
        self._used_cpu += res.cpu
        self._used_ram += res.ram_gib
        status = ContainerStatus(cid, "running")
        self._containers[cid] = launch
        self._statuses = None
        self._schedule_finish(cid, launch.duration_s)
        if launch.usage is not None:
            if self._usage is None:
                cfg = self._config
                self._usage = NodeUsage(self.resources, self._stats.usage, cfg.usage_report_threshold)
            self._usage.add(cid, res, launch.usage, launch.duration_s, self._clock.now())
            if self._config.mode == "delta":
                self._usage.dirty.add(cid)
            self._arm_usage()
        self._changes[cid] = status
        self._stats.containers_launched += 1
        self._touch()

    def _release(self, cid: int, exit_code: int) -> bool:
        launch = self._containers.pop(cid, None)
        if launch is None:
            return False
        self._statuses = None
        if launch.usage is not None and self._usage is not None:
            self._usage.dirty.discard(cid)
            self._usage.remove(
                cid, self._clock.now(), finished=exit_code == EXIT_SUCCESS, oom=exit_code == EXIT_OOM
            )
        res = launch.resources
        self._used_cpu -= res.cpu
        self._used_ram -= res.ram_gib
        self._changes[cid] = ContainerStatus(cid, "complete", exit_code)
        self._touch()
        return True

    def _schedule_finish(self, cid: int, delay: float) -> None:
        at = self._clock.now() + delay
        entry = DueAt(at)
        entry.cid = cid
        heapq.heappush(self._due, entry)
        if at < self._due_at:
            if self._due_timer is not None:
                self._due_timer.cancel()
            self._due_at = at
            self._due_timer = self._clock.call_later(delay, self._complete_due)

    def _unschedule(self, cid: int) -> None:
        """The container ends otherwise (killed, re-timed): rare, so the heap is rebuilt. The
        timer may stay armed for it and then finds nothing due."""
        due = self._due
        due[:] = [entry for entry in due if entry.cid != cid]
        heapq.heapify(due)

    def _complete_due(self) -> None:
        """The completion timer: end every container due by now, then arm for the next one."""
        self._due_timer = None
        self._due_at = math.inf
        due = self._due
        now = self._clock.now()
        limit = now + EPS
        if due and due[0] <= limit:
            first = heapq.heappop(due)
            if not due or due[0] > limit:
                self._finish(first.cid)  # nearly always: one container due
            else:
                # Entries due at the same time leave the heap in no set order: ended in order of
                # (time, container id), as a heap of those pairs would pop them.
                ended = [first]
                while due and due[0] <= limit:
                    ended.append(heapq.heappop(due))
                ended.sort(key=time_then_id)
                for entry in ended:
                    self._finish(entry.cid)
        if due and self._due_timer is None:
            at = self._due_at = float(due[0])
            self._due_timer = self._clock.call_later(at - now, self._complete_due)

    def _clear_due(self) -> None:
        self._due.clear()
        self._due_at = math.inf
        if self._due_timer is not None:
            self._due_timer.cancel()
            self._due_timer = None

    def _finish(self, cid: int) -> None:
        if self._release(cid, EXIT_SUCCESS):
            self._stats.containers_finished += 1
            if self._config.on_completion and self.state is NodeState.RUNNING:
                self._heartbeat()

    def _kill(self, cid: int, exit_code: int) -> None:
        if cid in self._containers:
            self._unschedule(cid)
            self._release(cid, exit_code)
