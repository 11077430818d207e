"""NCCL runs each collective only with the algorithms its device code implements."""

from __future__ import annotations

import pytest

from scaleup.topology import resolve_topology
from scaleup.tune.rules import enabled_algorithms

PRESETS = ("dgx-h100", "mi300x-8", "2xdgx-h100", "dgx1-v100", "pcie-8")


@pytest.mark.parametrize("preset", PRESETS)
@pytest.mark.parametrize("collective", ["broadcast", "reduce"])
def test_rooted_collectives_are_ring_only(preset: str, collective: str) -> None:
    """src/device/broadcast.h and reduce.h implement the ring alone (no tree, no NVLS)."""
    assert enabled_algorithms(resolve_topology(preset), collective) == ["ring"]


@pytest.mark.parametrize("preset", PRESETS)
@pytest.mark.parametrize("collective", ["all_gather", "reduce_scatter"])
def test_no_tree_for_gather_and_scatter(preset: str, collective: str) -> None:
    algos = enabled_algorithms(resolve_topology(preset), collective)
    assert "ring" in algos
    assert not {"tree", "hierarchical", "nvls_tree"} & set(algos)


def test_all_reduce_keeps_tree_and_our_family_keeps_everything() -> None:
    t = resolve_topology("dgx1-v100")
    assert "tree" in enabled_algorithms(t, "all_reduce")
    assert "tree" in enabled_algorithms(t, "broadcast", family="all")
