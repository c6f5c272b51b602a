"""``emulator study --cluster ADDRESS|local[:N]``: a TCP study's node hosts on a Dask cluster, for the
whole study: a running scheduler's address, or a Dask LocalCluster of N worker processes (default:
one per slice of nodes) started on loopback for the study (docs/cluster.md)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from emulator.study.spec import StudyError

if TYPE_CHECKING:
    from emulator.harness.dask_hosts import ClusterOptions


def check_spec(spec: str) -> None:
    count = spec.partition(":")[2] if spec.startswith("local:") else ""
    if spec.startswith("local:") and not (count.isdigit() and int(count) >= 1):
        raise StudyError(f"--cluster {spec}: expected an address, local or local:N with N >= 1")


@contextmanager
def dask_hosts(spec: str | None, slices: int) -> Iterator[ClusterOptions | None]:
    """None (worker processes, as `emulator run`), or the cluster's options while it is up."""
    if spec is None:
        yield None
        return
    check_spec(spec)
    from emulator.harness.dask_hosts import ClusterError, ClusterOptions

    if spec != "local" and not spec.startswith("local:"):
        yield ClusterOptions(spec)
        return
    count = spec.partition(":")[2]
    try:
        import distributed
    except ImportError as err:
        raise ClusterError(f"--cluster {spec}: needs Dask (pip install 'hbemu[cluster]')") from err
    with distributed.LocalCluster(  # type: ignore[no-untyped-call]
        n_workers=int(count) if count else slices, threads_per_worker=1, processes=True,
        dashboard_address=None, host="127.0.0.1",
    ) as local:
        yield ClusterOptions(local.scheduler_address, ("127.0.0.1", 0))
