"""The Python API in a script (docs/api.md): periodic vs delta heartbeats on the quick-start
scenario, then the same run from inside a running event loop, as a notebook cell would do it.

    python docs/examples/api_example.py [--out DIR]

Each run's files go in DIR/<mode> (default: temporary directories); nothing is written elsewhere.
"""

from __future__ import annotations

import argparse
import asyncio
from pathlib import Path

import emulator

SCENARIO = Path(__file__).resolve().parents[2] / "scenarios" / "quickstart.toml"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, help="parent directory of the runs' results")
    args = parser.parse_args()

    def out(name: str) -> Path | None:
        return args.out / name if args.out else None

    results = {
        mode: emulator.run(SCENARIO, out=out(mode), seed=7, duration_s=900, heartbeat__mode=mode)
        for mode in ("periodic", "delta")
    }
    print(f"{'':28}{'periodic':>12}{'delta':>12}")
    for key, label in (("heartbeats_sent", "heartbeats sent"), ("statuses_sent", "container statuses"),
                       ("rm_bytes_per_node_minute", "bytes to RM / node / min"),
                       ("cpu_utilization", "CPU utilisation")):
        a, b = (results[m].summary[key] for m in ("periodic", "delta"))
        print(f"{label:28}{a:>12,.4g}{b:>12,.4g}")

    # The time series is a small column table: columns, rows, column(name), or to_dataframe().
    ts = results["delta"].timeseries
    cpu = ts.column("cpu_utilization")
    print(f"delta: {len(ts)} samples, CPU utilisation peaked at {max(cpu):.1%} "
          f"(t = {ts.column('t_s')[cpu.index(max(cpu))]:g} s); files in {results['delta'].run_dir}")

    # In a notebook the cell already runs inside an event loop; emulator.run works there too (the
    # emulation gets a loop of its own on a worker thread), and `await emulator.run_async(...)`
    # does not block the notebook's loop.
    async def notebook_cell() -> emulator.Result:
        return await emulator.run_async(SCENARIO, out=out("delta-async"), seed=7, duration_s=900,
                                        heartbeat__mode="delta")

    again = asyncio.run(notebook_cell())
    print(f"same summary from a running event loop: {again.summary == results['delta'].summary}")


if __name__ == "__main__":
    main()
