"""The registries behind `scheduler.policy`, `heartbeat.mode` and `ring.detector`: built-ins
without installed metadata, plug-ins through entry points, and one clear error for every name
that cannot be used."""

from __future__ import annotations

import tomllib
from importlib.metadata import EntryPoints
from pathlib import Path

import pytest

from emulator.scenario.loader import ScenarioError
from nodemanager.config import BUILTIN_HEARTBEATS
from ringmon.config import BUILTIN_DETECTORS
from rm.plugins import PluginError, discover
from rm.scheduler.registry import BUILTIN_POLICIES, load_policy, policies
from tests.helpers import scenario
from tests.plugin_support import ROOT, fake_install


def test_pyproject_declares_the_built_in_tables() -> None:
    # The fallback tables and the declared entry points must not drift apart.
    declared = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["entry-points"]
    assert declared["hbemu.policies"] == dict(BUILTIN_POLICIES)
    assert declared["hbemu.heartbeats"] == dict(BUILTIN_HEARTBEATS)
    assert declared["hbemu.detectors"] == dict(BUILTIN_DETECTORS)


def test_built_ins_need_no_installed_metadata(monkeypatch: pytest.MonkeyPatch) -> None:
    # A checkout whose installed metadata predates the entry points (or has none) still runs them.
    monkeypatch.setattr("rm.plugins.entry_points", lambda: EntryPoints(()))
    assert policies().names() == ["drf", "drfh", "fifo", "packing", "tetris"]
    assert all(load_policy(n).__module__.startswith("rm.scheduler.") for n in BUILTIN_POLICIES)


def test_a_plug_in_cannot_replace_a_built_in(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake_install(tmp_path, monkeypatch, "usurper",
                 {"hbemu.policies": {"drf": "rm.scheduler.policies.fifo:FIFOPolicy"}})
    assert policies().entry("drf").value == "rm.scheduler.policies.drf:DRFPolicy"


def test_a_name_two_plug_ins_claim_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake_install(tmp_path / "a", monkeypatch, "one",
                 {"hbemu.policies": {"mine": "rm.scheduler.policies.drf:DRFPolicy"}})
    fake_install(tmp_path / "b", monkeypatch, "two",
                 {"hbemu.policies": {"mine": "rm.scheduler.policies.fifo:FIFOPolicy"}})
    with pytest.raises(ScenarioError, match=(
        r"at `scheduler.policy`: scheduling policy `mine` is declared by more than one installed package "
        r"\((one|two) \(rm.scheduler.policies.(drf|fifo)"
    )):
        scenario(scheduler={"policy": "mine"})


def test_a_plug_in_that_is_not_a_policy_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake_install(tmp_path, monkeypatch, "wrong", {"hbemu.policies": {
        "no-module": "no_such_module:Policy", "not-a-class": "rm.scheduler.policies.drf:drf_key",
        "no-params": "rm.state.cluster:Cluster",
    }})
    with pytest.raises(PluginError, match=r"`no-module` \(wrong\) cannot be loaded from `no_such_module:"):
        load_policy("no-module")
    with pytest.raises(PluginError, match="`not-a-class` \\(wrong\\) is not a class"):
        load_policy("not-a-class")
    with pytest.raises(ScenarioError, match=r"at `scheduler.policy`: .*`Cluster.Params` must be a msgspec"):
        scenario(scheduler={"policy": "no-params"})


def test_an_unknown_name_lists_the_registered_ones() -> None:
    with pytest.raises(ScenarioError, match=(
        r"^<test>: at `scheduler.policy`: unknown scheduling policy `lottery`; expected one of the "
        r"registered ones: `drf`, `drfh`, `fifo`, `packing`, `tetris` \(plug-ins register under the "
        r"entry-point group `hbemu.policies`\)$"
    )):
        scenario(scheduler={"policy": "lottery"})
    with pytest.raises(ScenarioError, match=(
        r"^<test>: at `heartbeat.mode`: unknown heartbeat mode `sometimes`; expected one of the registered "
        r"ones: `delta`, `periodic` \(plug-ins register under the entry-point group `hbemu.heartbeats`\)$"
    )):
        scenario(heartbeat={"mode": "sometimes"})
    with pytest.raises(ScenarioError, match=r"^<test>: at `ring.detector`: unknown failure detector `gos"):
        scenario(ring={"detector": "gossip"})


def test_built_in_policies_take_no_params_table() -> None:
    with pytest.raises(ScenarioError, match=(
        r"^<test>: at `scheduler.params.window`: unknown field \(the parameters of policy `packing`: none\)$"
    )):
        scenario(scheduler={"policy": "packing", "params": {"window": 3}})


def test_a_plugged_heartbeat_mode_or_detector_is_named_and_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    fake_install(tmp_path, monkeypatch, "extra-modes", {
        "hbemu.heartbeats": {"burst": "extra:Burst"}, "hbemu.detectors": {"gossip": "extra:Gossip"},
    })
    assert "burst" in discover("hbemu.heartbeats", "heartbeat mode", BUILTIN_HEARTBEATS).names()
    with pytest.raises(ScenarioError, match=(
        r"at `heartbeat.mode`: heartbeat mode `burst` is registered by extra-modes \(extra:Burst\), but "
        r"heartbeat modes cannot be plugged in yet: this version implements only `delta`, `periodic`"
    )):
        scenario(heartbeat={"mode": "burst"})
    with pytest.raises(ScenarioError, match=r"at `ring.detector`: failure detector `gossip` is registered"):
        scenario(ring={"detector": "gossip"})


def test_tiers_with_a_node_choosing_policy_are_refused() -> None:
    # Tiers wrap policies that order operations; drfh's order would have ignored them silently.
    with pytest.raises(ScenarioError, match=(
        r"^<test>: at `scheduler.tiers.enabled`: tiers would not order `drfh`: it chooses which "
        r"operation starts on which node itself"
    )):
        scenario(scheduler={"policy": "drfh", "tiers": {"enabled": True}})
    scenario(scheduler={"policy": "drf", "tiers": {"enabled": True}})  # fine
    scenario(scheduler={"policy": "drfh"})  # fine


@pytest.mark.parametrize("policy", ["packing", "fifo", "tetris", "drfh"])
def test_a_placement_policy_with_another_scheduling_policy_is_refused(policy: str) -> None:
    # The symptom of issue 31: packing + best-fit validated, then packing never ran (0 offers).
    with pytest.raises(ScenarioError, match=(
        rf'^<test>: at `scheduler.policy`: `{policy}` would never run: `scheduler.placement.policy = '
        r'"best-fit"` chooses the nodes and orders the operations itself'
    )):
        scenario(scheduler={"policy": policy, "placement": {"policy": "best-fit"}})
    scenario(scheduler={"policy": "drf", "placement": {"policy": "best-fit"}})  # fine
    scenario(scheduler={"policy": policy})  # fine
