"""Wiring of the direct-network presets (TPU v5p / TPU7x slices, Trainium2 server and
UltraServer): links per chip, hop counts and bisection, from the analysis functions."""

from __future__ import annotations

import pytest

from scaleup import hardware
from scaleup.errors import UsageError
from scaleup.sim.protocols import library_for
from scaleup.topology import analysis as A
from scaleup.topology import resolve_topology
from scaleup.topology.machines_torus import tpu_slice_wrap

ICI_GB = hardware.link_tech("ici").bandwidth_gb_per_s  # 100 GB/s per link per direction
NL3_GB = hardware.link_tech("neuronlink3").bandwidth_gb_per_s  # 160 (estimate)


def _links_per_chip(spec: str) -> list[int]:
    t = resolve_topology(spec)
    return [A.links_per_accelerator(t, [r]) for r in range(len(t.accelerators))]


@pytest.mark.parametrize(
    ("spec", "chips", "per_chip", "max_hops", "bisection_links"),
    [
        # one cube: 3D torus, 6 links per chip, diameter 2+2+2, bisection 2 x 4^2 links
        ("tpu-v5p", 64, {6}, 6, 32),
        ("tpu7x", 64, {6}, 6, 32),
        # two cubes along z: torus 4x4x8, diameter 2+2+4, cut across z: 2 x 16 links
        ("tpu-v5p:shape=4x4x8", 128, {6}, 8, 32),
        # sub-cube slices are meshes: corner chips 3 links, diameter 1+3+3, cut 2 x 4 links
        ("tpu-v5p:shape=2x4x4", 32, {3, 4, 5}, 7, 8),
        ("tpu-v5p:shape=2x2x1", 4, {2}, 2, 2),
        # trn2.48xlarge: 4x4 torus, 4 links per chip, diameter 2+2, cut 2 x 4 links
        ("trn2-16", 16, {4}, 4, 8),
        # UltraServer: 4x4x4 torus (z = server ring), 6 links per chip
        ("trn2-ultraserver", 64, {6}, 6, 32),
    ],
)
def test_preset_wiring(
    spec: str, chips: int, per_chip: set[int], max_hops: int, bisection_links: int
) -> None:
    t = resolve_topology(spec)
    assert len(t.accelerators) == chips
    assert not t.switches
    assert set(_links_per_chip(spec)) == per_chip
    assert A.max_hops(t) == max_hops
    rate = NL3_GB if spec.startswith("trn2") else ICI_GB
    assert A.summary(t)["bisection_gb_per_s"] == pytest.approx(bisection_links * rate)


def test_per_chip_bandwidth_matches_the_vendor_figure() -> None:
    # Google: 1,200 GB/s bidirectional ICI per chip = 600 per direction over 6 links
    assert A.per_accelerator_gb_per_s(resolve_topology("tpu-v5p")) == pytest.approx(600.0)
    assert A.per_accelerator_gb_per_s(resolve_topology("tpu7x")) == pytest.approx(600.0)
    # AWS: 1.28 TB/s NeuronLink-v3 per chip, read as bidirectional over the 4 torus links
    assert A.per_accelerator_gb_per_s(resolve_topology("trn2-16")) == pytest.approx(640.0)


def test_neighbours_follow_the_rank_convention() -> None:
    t = resolve_topology("tpu-v5p")  # rank = x + 4 (y + 4 z)
    pairs = {frozenset((x.a, x.b)) for x in t.links}
    assert frozenset(("g0", "g1")) in pairs  # x
    assert frozenset(("g0", "g3")) in pairs  # x wraparound
    assert frozenset(("g0", "g4")) in pairs  # y
    assert frozenset(("g0", "g48")) in pairs  # z wraparound
    assert A.hops(t, 0, 63) == 3  # (3,3,3) is one wraparound hop away in each dimension


def test_slice_wraparound_rule() -> None:
    assert tpu_slice_wrap((4, 4, 4))
    assert tpu_slice_wrap((8, 16, 16))
    assert not tpu_slice_wrap((2, 4, 4))


@pytest.mark.parametrize(
    "spec",
    ["tpu-v5p:shape=4x4x6", "tpu-v5p:shape=4x4", "tpu-v5p:shape=32x32x32", "tpu7x:shape=0x4x4"],
)
def test_bad_slices(spec: str) -> None:
    with pytest.raises(UsageError):
        resolve_topology(spec)


@pytest.mark.parametrize("spec", ["tpu-v5p", "tpu7x", "trn2-16", "trn2-ultraserver"])
def test_generic_vendor_runs_the_nccl_shaped_model(spec: str) -> None:
    t = resolve_topology(spec)
    assert {hardware.accelerator(d.type).vendor for d in t.accelerators} == {"generic"}
    assert library_for(t) == "nccl"
