"""Fat trees (scaleup.topology.fabric) and the Nx presets built on them: hand-worked shapes, the
bisection of a non-blocking and an oversubscribed tree, unchanged small fabrics, NVL72 racks."""

from __future__ import annotations

import hashlib
import json
import math

import pytest
from hypothesis import given
from hypothesis import strategies as st
from typer.testing import CliRunner

from scaleup.cli import app, topo
from scaleup.errors import UsageError
from scaleup.topology import Device, Topology, resolve_topology
from scaleup.topology import analysis as A
from scaleup.topology.fabric import leaf_down_ports, plan_fat_tree
from scaleup.topology.generators import multi_node

NDR_GB_PER_S = 50.0  # ib-ndr: 400 Gb/s per direction


def _one_gpu() -> Topology:
    """A server of one H100: the bisection of its Nx fabric is the fat tree's alone."""
    return Topology("one-h100", [Device.of("g0", "H100")], [])


# ---- plans worked by hand -----------------------------------------------------------------------


def test_k4_fat_tree_of_al_fares() -> None:
    # 4-port switches, 16 hosts: 8 edge, 8 aggregation (4 pods x 2), 4 core; every pair 1 link.
    plan = plan_fat_tree([2] * 8, radix=4)
    assert plan.tiers == 3
    assert plan.pods == (2, 2, 2, 2)
    assert plan.switches_per_tier == (8, 8, 4)
    assert (plan.leaf_spine_links, plan.spine_core_links) == (1, 1)
    assert plan.links_between_switches == 8 * 2 + 4 * 2 * 2


def test_two_tiers_worked_by_hand() -> None:
    # radix 4, 2 leaves of 2 hosts: 2 uplinks each, 1 spine reached over 2 parallel links.
    plan = plan_fat_tree([2, 2], radix=4)
    assert (plan.tiers, plan.switches_per_tier, plan.leaf_spine_links) == (2, (2, 1), 2)
    # radix 64, 2,048 NICs: 64 leaves of 32, 32 spines, one link per pair (every port used).
    plan = plan_fat_tree([32] * 64, radix=64)
    assert (plan.tiers, plan.switches_per_tier, plan.leaf_spine_links) == (2, (64, 32), 1)


def test_three_tiers_of_64_ports() -> None:
    # 16,384 NICs: 512 leaves in 16 pods of 32; 32 spines per pod; 32 core groups of 8 cores,
    # each spine's 32 uplinks spread 4 per core; each core 16 pods x 4 = 64 ports.
    plan = plan_fat_tree([32] * 512, radix=64)
    assert plan.switches_per_tier == (512, 512, 256)
    assert (plan.leaf_spine_links, plan.spine_up, plan.spine_core_links) == (1, 32, 4)
    assert plan.links_between_switches == 512 * 32 + 512 * 8
    # 2,049 NICs: 65 leaves, the first two tiers no longer fit; pods of 22/22/21 leaves.
    plan = plan_fat_tree([32] * 64 + [1], radix=64)
    assert plan.pods == (22, 22, 21)
    assert plan.switches_per_tier == (65, 96, 64)


def test_oversubscription_sets_the_leaf_ports() -> None:
    assert [leaf_down_ports(64, o) for o in (1, 2, 3, 0.5)] == [32, 42, 48, 21]
    plan = plan_fat_tree([42] * 4, radix=64, oversubscription=2)
    assert (plan.up, plan.tiers) == (21, 2)
    assert plan_fat_tree([10], radix=64, oversubscription=5).tiers == 1  # one switch: no uplinks


def test_beyond_three_tiers_is_refused() -> None:
    with pytest.raises(UsageError, match="more than three tiers"):
        plan_fat_tree([2] * 9, radix=4)


@pytest.mark.parametrize("bad", [0, -1, 0.0, math.inf, math.nan, "2", True, None])
def test_bad_oversubscription_names_the_parameter(bad: object) -> None:
    with pytest.raises(UsageError) as info:
        plan_fat_tree([2, 2], radix=4, oversubscription=bad)  # type: ignore[arg-type]
    assert info.value.entry == "oversubscription"
    with pytest.raises(UsageError, match="no port down"):
        leaf_down_ports(64, 0.01)


@given(
    radix=st.sampled_from([4, 6, 8, 18, 36, 64]),
    oversubscription=st.sampled_from([0.5, 1, 1.5, 2, 3]),
    endpoints=st.integers(2, 5000),
)
def test_every_plan_fits_its_ports_with_the_fewest_tiers(
    radix: int, oversubscription: float, endpoints: int
) -> None:
    down = leaf_down_ports(radix, oversubscription)
    leaves = [down] * (endpoints // down) + ([endpoints % down] if endpoints % down else [])
    if len(leaves) > radix * radix // 2:
        with pytest.raises(UsageError):
            plan_fat_tree(leaves, radix, oversubscription)
        return
    plan = plan_fat_tree(leaves, radix, oversubscription)
    assert plan.tiers == (1 if len(leaves) == 1 else 2 if len(leaves) <= radix else 3)
    if plan.tiers == 1:
        return
    assert max(leaves) + plan.up <= radix  # a leaf's ports
    assert plan.up * oversubscription >= max(leaves)  # at most o:1
    assert plan.up % plan.spines_per_pod == 0
    spine_down = max(plan.pods) * plan.leaf_spine_links
    if plan.tiers == 2:
        assert spine_down <= radix
    else:
        assert spine_down <= radix // 2
        assert plan.spine_up == spine_down  # non-blocking above the leaves
        assert len(plan.pods) * plan.spine_core_links <= radix  # a core's ports
        assert plan.spine_up % plan.cores_per_group == 0


# ---- topologies ---------------------------------------------------------------------------------

#: Topologies as built before fat trees of three tiers existed (sha256 of the devices and links):
#: single-switch fabrics, two-tier ones and rail-optimised ones must not change.
UNCHANGED = {
    "2xdgx-h100": (41, 96, "64ae6a9882e87677"),
    "4xdgx-h100": (81, 192, "68a7321be4436072"),
    "2xmi300x-8": (33, 88, "eedce94f56e2ea00"),
    "2xdgx-a100": (45, 128, "5b0db3bc51ae0512"),
    "2xdgx-a100:nic=ib-hdr": (45, 128, "f12f0593793992bd"),
    "4xhgx-b200:nic=ib-xdr": (73, 128, "4d3ff6b990141be3"),
    "2xpcie-8": (45, 58, "9666f5b3fd0bcc2b"),
    "2xdgx-h100:nic=eth-400g": (41, 96, "265c0a9af26a5e0d"),
    "2xdgx-h100:rail_optimized=true": (49, 104, "6efbe61f7b7506c5"),
    "16xdgx-h100": (326, 776, "940da9de38bbdb7f"),
    "32xdgx-h100:rail_optimized=true": (652, 1568, "b7c45743cc11d4c3"),
    "8xgb200-nvl72": (1330, 11808, "f9f864855aad3bc7"),
}


@pytest.mark.parametrize("spec", sorted(UNCHANGED))
def test_existing_fabrics_are_unchanged(spec: str) -> None:
    t = resolve_topology(spec)
    body = repr((t.name, t.devices, t.links, t.peer_access, t.description))
    digest = hashlib.sha256(body.encode()).hexdigest()[:16]
    assert (len(t.devices), len(t.links), digest) == UNCHANGED[spec]


def test_one_to_one_bisection_is_half_the_nics() -> None:
    t = multi_node(_one_gpu(), 168)  # 6 leaves (5 x 32 + 8) under 32 spines
    assert A.scale_out(t)["tiers"] == 2  # type: ignore[index]
    assert A.bisection_gb_per_s(t) == pytest.approx(168 / 2 * NDR_GB_PER_S)


def test_two_to_one_halves_the_bisection() -> None:
    t = multi_node(_one_gpu(), 168, oversubscription=2)  # 4 leaves of 42 down, 21 up
    fabric = A.scale_out(t)
    assert fabric == {
        "switch_types": ["ib-switch"],
        "tiers": 2,
        "switches_per_tier": [4, 3],
        "oversubscription": 2.0,
    }
    assert A.bisection_gb_per_s(t) == pytest.approx(168 / 4 * NDR_GB_PER_S)
    assert "2:1 oversubscribed" in t.description


def test_three_tier_bisection_is_half_the_nics() -> None:
    t = multi_node(_one_gpu(), 2080)  # 65 leaves: three tiers
    assert A.scale_out(t)["switches_per_tier"] == [65, 96, 64]  # type: ignore[index]
    assert A.bisection_gb_per_s(t) == pytest.approx(2080 / 2 * NDR_GB_PER_S)
    assert A.max_hops(t) == 8  # nic, leaf, spine, core, spine, leaf, nic


def test_three_tier_nx_preset_counts() -> None:
    t = resolve_topology("300xmi300x-8")  # 2,400 NICs: 75 leaves in 3 pods of 25
    leaves = [d for d in t.switches if d.id.startswith("net.leaf")]
    spines = [d for d in t.switches if ".spine" in d.id]
    cores = [d for d in t.switches if d.id.startswith("net.core")]
    # 32 spines per pod (25 x 1 link down, 25 up); cores: 3 pods x 25 / c <= 64 -> c = 5 per
    # group, 5 links per spine-core pair.
    assert (len(leaves), len(spines), len(cores)) == (75, 96, 160)
    assert len(t.devices) == 300 * 16 + 75 + 96 + 160
    assert len(t.links) == 300 * (28 + 16) + 75 * 32 + 96 * 5
    assert {x.count for x in t.links if x.a.startswith("net.pod")} == {5}


def test_rail_optimised_scales_in_groups() -> None:
    t = resolve_topology("64xdgx-h100:rail_optimized=true")  # 2 groups of 32 servers x 8 rails
    ids = {d.id for d in t.switches}
    assert {"net.group0.rail0", "net.group1.rail7"} <= ids
    assert A.hops(t, "n0.g0", "n31.g0") == 4  # same rail, same group: one switch
    assert A.hops(t, "n0.g0", "n32.g0") == 6  # another group: through a spine
    assert A.scale_out(t)["switches_per_tier"][0] == 16  # type: ignore[index]


def test_nvl72_racks() -> None:
    t = resolve_topology("8xgb200-nvl72")
    assert (len(t.accelerators), len(t.nodes), t.ranks_per_node) == (576, 8, 72)
    assert {d.type for d in t.nics} == {"ib-ndr"}  # one ConnectX-7 (NDR 400G) per GPU
    assert len(t.nics) == 576
    assert A.per_accelerator_gb_per_s(t) == pytest.approx(900.0)  # NVLink5 inside the rack
    assert A.scale_out(t)["switches_per_tier"] == [18, 16]  # type: ignore[index]
    assert A.bottleneck_gb_per_s(t, "n0.g0", "n7.g0") == pytest.approx(NDR_GB_PER_S)
    eth = resolve_topology("8xgb200-nvl72:nic=eth-800g")
    assert {d.type for d in eth.switches if d.id.startswith("net.")} == {"eth-switch"}


def test_a_large_fabric_summary_is_sampled() -> None:
    t = resolve_topology("300xmi300x-8")
    facts = A.summary(t)
    assert facts["pairs_sampled"] is True
    assert facts["hop_sources"] == A.SAMPLED_SOURCES
    assert facts["device_types"] == {"MI300X": 2400, "ib-switch": 331, "ib-ndr": 2400}
    assert facts["scale_out"]["tiers"] == 3
    assert facts["max_hops"] == 8


runner = CliRunner()


@pytest.mark.parametrize("value", ["0", "-2", "abc", "inf"])
def test_cli_bad_oversubscription_is_one_line_exit_2(value: str) -> None:
    result = runner.invoke(app, ["topo", "show", f"2xdgx-h100:oversubscription={value}"])
    assert result.exit_code == 2
    assert "oversubscription" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


def test_cli_show_three_tiers_and_refuse_a_huge_pair_table() -> None:
    result = runner.invoke(app, ["topo", "show", "300xmi300x-8:oversubscription=2", "--json"])
    assert result.exit_code == 0, result.output
    facts = json.loads(result.stdout)
    assert facts["scale_out"]["oversubscription"] == pytest.approx(2.0)
    table = runner.invoke(app, ["topo", "show", "300xmi300x-8"])
    assert "scale-out fabric" in table.stdout
    assert "sampled" in table.stdout
    fabric = A.scale_out(resolve_topology("300xmi300x-8"))
    assert topo._fabric_text(fabric) == "3 tiers of ib-switch (75 / 96 / 160), leaves 1:1"  # type: ignore[arg-type]
    refused = runner.invoke(app, ["topo", "show", "300xmi300x-8", "--pairs"])
    assert refused.exit_code == 2
    assert "MAX_PAIR_TABLE_RANKS" in refused.stderr
