"""An overloaded RM reproduced deterministically with the service-time model (the paper's effect)."""

from __future__ import annotations

from emulator.harness.runner import run_blocking
from emulator.results.summary import build_summary
from tests.helpers import scenario


def overloaded(expiry_s: float, heartbeat_us: float) -> dict:
    return build_summary(
        run_blocking(
            scenario(
                cluster={"nodes": [{"count": 200, "cpu": 8, "ram_gib": 16}]},
                heartbeat={"mode": "periodic", "interval_s": 3},
                rm={"expiry_s": expiry_s, "service_time": {"heartbeat_us": heartbeat_us}},
                workload={
                    "operations": [
                        {
                            "name": "a",
                            "cpu": 1,
                            "ram_gib": 1,
                            "job_count": 800,
                            "seconds_mean": 60,
                            "loop": True,
                        }
                    ]
                },
                run={"duration_s": 300, "warmup_s": 30},
            )
        )
    )


def test_a_fast_rm_keeps_up() -> None:
    s = overloaded(expiry_s=20, heartbeat_us=1000)  # 200 beats x 1 ms per 3 s interval: 7% busy
    assert s["h1"] == 1.0
    assert s["nodes_lost"] == 0
    assert s["rm_wait_p99_s"] < 0.2


def test_a_saturated_rm_queues_heartbeats_and_loses_healthy_nodes() -> None:
    # 200 beats x 150 ms = 30 s of work per 3 s interval: the queue fills (one beat in flight per
    # node), nodes wait for answers, and each node's beat is processed only every ~30 s: past the
    # 20 s expiry, so healthy nodes are declared lost.
    s = overloaded(expiry_s=20, heartbeat_us=150_000)
    assert s["rm_busy_fraction"] > 0.95
    assert s["h1"] < 0.8
    assert s["rm_queue_depth_max"] > 100
    assert s["rm_wait_max_s"] > 20
    assert s["heartbeats_skipped"] > 0
    assert s["nodes_lost"] > 0  # healthy nodes removed: false removals


def test_overload_is_deterministic() -> None:
    assert overloaded(20, 150_000) == overloaded(20, 150_000)
