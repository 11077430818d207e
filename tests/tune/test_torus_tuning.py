"""The tuner on tori: the ``torus`` algorithm is a candidate on a whole TorusTopology of parts
whose vendor ships no NCCL/RCCL, with the fabric's ``dims`` and channel counts that give every
directed link a lane; nothing changes for NCCL fabrics or for part of a torus."""

from __future__ import annotations

import pytest

from scaleup.topology import resolve_topology
from scaleup.topology.torus import torus
from scaleup.tune.channels import GroupShape, torus_channel_counts, torus_group
from scaleup.tune.request import BenchRequest
from scaleup.tune.rules import candidates, enabled_algorithms
from scaleup.tune.search import TuneSession


@pytest.mark.parametrize("preset", ["tpu7x", "tpu-v5p:shape=4x4x4", "trn2-16", "trn2-ultraserver"])
def test_torus_is_a_candidate_on_whole_tpu_and_trainium_tori(preset: str) -> None:
    t = resolve_topology(preset)
    assert "torus" in enabled_algorithms(t, "all_reduce")  # family nccl: no NCCL on these
    assert "torus" in enabled_algorithms(t, "all_reduce", family="all")
    assert "torus" in enabled_algorithms(t, "all_reduce", list(range(len(t.accelerators))))
    assert "torus" not in enabled_algorithms(t, "all_reduce", [0, 1])
    for collective in ("all_gather", "reduce_scatter"):  # its two halves too
        assert "torus" in enabled_algorithms(t, collective)
    for collective in ("broadcast", "reduce", "all_to_all", "send_recv"):
        assert "torus" not in enabled_algorithms(t, collective)


def test_torus_counts_add_two_per_dimension_and_leave_the_others_alone() -> None:
    t = resolve_topology("tpu7x")
    cands = candidates(t, "all_reduce", counts=(1, 2, 4))
    by_algo: dict[str, set[int]] = {}
    for c in cands:
        by_algo.setdefault(c.algorithm, set()).add(c.channels)
    assert by_algo["torus"] == {1, 2, 4, 6, 12, 24}
    assert by_algo["ring"] == by_algo["tree"] == {1, 2, 4}
    assert {c.channels for c in candidates(t, "all_reduce", channels=3)} == {3}
    assert torus_channel_counts((4, 1, 4), ()) == (4, 8, 16, 32)
    assert torus_channel_counts((1,), (2,)) == (2, 4, 8, 16, 32)


def test_group_shape_gives_the_fabric_dims() -> None:
    t = resolve_topology("trn2-16")
    shape = GroupShape.of(t)
    assert shape.torus_dims == (4, 4) == torus_group(t)
    assert shape.params("torus", 8) == {"dims": [4, 4]}
    part = GroupShape.of(t, [0, 1, 2, 3])
    assert part.torus_dims is None
    assert part.params("torus", 8) == {}
    assert GroupShape.of(resolve_topology("dgx-h100")).torus_dims is None


def test_nccl_fabrics_never_get_torus() -> None:
    for preset in ("dgx-h100", "mi300x-8", "ualink-pod"):
        t = resolve_topology(preset)
        assert "torus" not in enabled_algorithms(t, "all_reduce", family="all")
    # a torus of NVIDIA parts: the fabric allows it, but NCCL does not run it
    t = torus((2, 2), "H100")
    assert "torus" in enabled_algorithms(t, "all_reduce", family="all")
    assert "torus" not in enabled_algorithms(t, "all_reduce")


def test_the_tuner_picks_the_torus_for_large_all_reduce_on_trn2() -> None:
    """trn2-16 (4x4 NeuronLink torus, 4 links of 160 GB/s per chip): at 256 MiB the tuned
    all_reduce is the torus algorithm with a multiple of 2 D = 4 lanes, busbw above what one
    bidirectional ring's 2 links carry (320 GB/s) and below the egress bound 4 x 160 GB/s."""
    t = resolve_topology("trn2-16")
    size = 1 << 28
    (choice,) = TuneSession().sweep(t, BenchRequest(sizes_bytes=(size,)))
    assert choice.algorithm == "torus"
    assert choice.channels % 4 == 0
    busbw = size / choice.time_s * 2 * 15 / 16
    assert 320e9 < busbw < 640e9


@pytest.mark.parametrize(
    ("collective", "low", "high"),
    [("all_gather", 0.9 * 640e9, 640e9), ("reduce_scatter", 320e9, 640e9)],
)
def test_the_tuner_runs_both_halves_on_every_link_of_trn2(
    collective: str, low: float, high: float
) -> None:
    """trn2-16 at 256 MiB: the tuned all_gather and reduce_scatter are the torus algorithm,
    above what the flat ring's best channels gave (255 / 280 GB/s busbw at 1 GiB: its rings
    share links) and the 320 GB/s of one bidirectional ring's two links. Worked by hand:
    all_gather moves 15/16 of the buffer out of each chip over its 4 links of 160 GB/s, so its
    busbw bound is 640 GB/s, and it reaches over 90% of it; reduce_scatter is bound by HBM
    instead (each received byte read twice and written once, plus the first dimension's input
    copies: 5.25 bytes of HBM traffic a byte of buffer at 2407 GB/s)."""
    t = resolve_topology("trn2-16")
    size = 1 << 28
    (choice,) = TuneSession().sweep(t, BenchRequest(op=collective, sizes_bytes=(size,)))
    assert choice.algorithm == "torus"
    busbw = size / choice.time_s * 15 / 16
    assert low < busbw < high
