"""The shared secret: from the scenario, an environment variable or a file, with clear errors;
never in a log line or a result file; and the authority rules nodes enforce on what they accept."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path

import pytest

from emulator.harness.eventlog import make_logger
from emulator.scenario.loader import ScenarioError, load_scenario
from emulator.time.clock import LoopClock, run
from emulator.transport.framing import FrameEncoder
from emulator.transport.tcp import TcpClient, TcpServer
from ringmon.protocol import Ring
from rm.protocol import ContainerLaunch, KillContainers, LaunchContainers, Register, Resources, RingUpdate
from tests.process.test_tcp_abuse import events, honest_cluster, hung_up
from tests.process.test_transport_conformance import FakeNode, eventually

SECRET = "hunter2-Zq9xK7"
BASE = """
name = "auth"
[cluster]
nodes = [{{ count = 20, cpu = 8, ram_gib = 16 }}]
[rm]
{rm}
[transport]
kind = "tcp"
[[workload.operations]]
name = "job"
cpu = 1
ram_gib = 2
job_count = 100
seconds_mean = 5
seconds_deviation = 1
[run]
duration_s = 12
clock = "realtime"
speed = 4
warmup_s = 3
"""


def write(tmp_path: Path, rm: str) -> Path:
    p = tmp_path / "auth.toml"
    p.write_text(BASE.format(rm=rm))
    return p


def test_secret_from_file_relative_to_the_scenario(tmp_path: Path) -> None:
    (tmp_path / "secret.txt").write_text(SECRET + "\n")
    sc = load_scenario(write(tmp_path, 'credentials_file = "secret.txt"'))
    assert sc.rm.credentials == SECRET and not sc.rm.credentials_file


def test_secret_from_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EMU_TEST_SECRET", SECRET)
    assert load_scenario(write(tmp_path, 'credentials_env = "EMU_TEST_SECRET"')).rm.credentials == SECRET


@pytest.mark.parametrize(
    ("rm", "expected"),
    [
        ('credentials_file = "nope.txt"', "at `rm.credentials_file`: "),
        ('credentials_env = "EMU_TEST_UNSET_VAR"', "environment variable `EMU_TEST_UNSET_VAR` is not set"),
        ('credentials = "x"\ncredentials_env = "Y"', "one way only"),
    ],
)
def test_bad_secret_sources_are_clear_errors(tmp_path: Path, rm: str, expected: str) -> None:
    with pytest.raises(ScenarioError) as err:
        load_scenario(write(tmp_path, rm))
    assert expected in str(err.value) and "auth.toml" in str(err.value)
    if "nope" in rm:
        assert "no such file" in str(err.value)


def test_secret_never_reaches_logs_or_results(tmp_path: Path) -> None:
    """A whole TCP run (RM + worker process) with the secret from a file: it works (every node
    registers) and the secret appears in no file of the run directory."""
    (tmp_path / "secret.txt").write_text(SECRET)
    out = tmp_path / "out"
    proc = subprocess.run(
        [sys.executable, "-m", "emulator", "run", str(write(tmp_path, 'credentials_file = "secret.txt"')),
         "--out", str(out), "--quiet"],
        capture_output=True, text=True, timeout=90, check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert '"registrations": 20' in (out / "summary.json").read_text()
    files = [f for f in out.iterdir() if f.is_file()]
    assert any(f.name == "events.jsonl" for f in files)
    for f in files:
        assert SECRET not in f.read_text(errors="replace"), f.name
    assert SECRET not in proc.stdout + proc.stderr


def test_wrong_secret_is_refused_unlogged_and_its_connection_closed() -> None:
    async def main(clock: LoopClock) -> None:
        async with honest_cluster(clock, credentials=SECRET) as h:
            reader, writer = await asyncio.open_connection(*h.address)
            writer.write(FrameEncoder().encode(
                1, Register(address="intruder", resources=Resources(8, 16), credentials="guess-123")
            ))
            await writer.drain()
            assert await hung_up(reader, 5)  # refused, then closed by the handshake timeout
            writer.close()
            await h.still_served()
            assert "intruder" not in {n.address for n in h.rm.nodes_view()}
            assert any(e["event"] == "node.rejected" and e["reason"] == "bad credentials"
                       for e in events(h.sink))
            log = h.sink.getvalue()
            assert SECRET not in log and "guess-123" not in log

    run(main, "realtime", speed=10)


def test_nodes_take_commands_only_on_the_channel_they_opened_to_the_rm() -> None:
    """A node-hosting client delivers RM frames only to the node whose channel they came on;
    frames on channels it never opened (another node's, or made up) reach nobody."""

    async def main(clock: LoopClock) -> None:
        links: list[object] = []
        log = make_logger(clock, None)
        server = TcpServer(lambda link, msg: links.append(link), log, handshake_timeout_s=None)
        host, port = await server.start("127.0.0.1", 0)
        client = TcpClient(host, port, clock, log)
        task = asyncio.get_running_loop().create_task(client.run())
        try:
            async with asyncio.timeout(5):
                await client.wait_connected()
            a, b = FakeNode(), FakeNode()
            client.connect(a)
            client.connect(b)
            a.link.send(Register(address="a", resources=Resources(8, 16)))
            await eventually(clock, lambda: len(links) == 1)
            conn = next(iter(server.connections))
            launch = LaunchContainers(containers=(ContainerLaunch(1, Resources(1, 1), 5.0),))
            for channel in (b.link.channel + 1, 999):  # never opened by the client
                conn.send(channel, launch)
                conn.send(channel, KillContainers(container_ids=(1,)))
                conn.send(channel, RingUpdate(ring=Ring(version=9, ids=(1, 2))))
            links[0].send(launch)  # type: ignore[attr-defined]
            await eventually(clock, lambda: len(a.got) == 1)
            await clock.sleep(0.2)
            assert a.got == [launch] and b.got == []
        finally:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
            await server.close()

    run(main, "realtime")


def test_emulator_nodes_reads_the_secret_from_a_file_or_variable_not_only_the_command_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from emulator.cli.main import build_parser, main
    from emulator.cli.processes import node_configs

    (tmp_path / "secret.txt").write_text(SECRET + "\n")
    base = ["nodes", "--connect", "127.0.0.1:1", "--count", "3"]
    args = build_parser().parse_args([*base, "--credentials-file", str(tmp_path / "secret.txt")])
    assert {c.credentials for c in node_configs(args, "127.0.0.1", 1)} == {SECRET}
    monkeypatch.setenv("EMU_TEST_NODE_SECRET", SECRET)
    args = build_parser().parse_args([*base, "--credentials-env", "EMU_TEST_NODE_SECRET"])
    assert {c.credentials for c in node_configs(args, "127.0.0.1", 1)} == {SECRET}
    assert main([*base, "--credentials-env", "EMU_TEST_UNSET_VAR"]) == 2
    err = capsys.readouterr().err
    assert "at `--credentials-env`: environment variable `EMU_TEST_UNSET_VAR` is not set" in err
