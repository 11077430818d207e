"""NCCL's tree inside one node is a chain (src/graph/connect.cc ``ncclTopoPreset``, lines 43-62:
``tree.up = treeIntra[i-1]``, ``tree.down[0] = treeIntra[i+1]``); the double binary tree of
src/graph/trees.cc spans nodes, so on one node nothing else is left of it."""

from __future__ import annotations

import pytest

from scaleup.topology import resolve_topology
from scaleup.tune import tune
from scaleup.tune.channels import GroupShape, uses_chains


def _is_chain(parents: list[int]) -> bool:
    children = [0] * len(parents)
    for p in parents:
        if p >= 0:
            children[p] += 1
    return parents.count(-1) == 1 and max(children) <= 1 and children.count(0) == 1


@pytest.mark.parametrize("preset", ["dgx-h100", "hgx-b200", "dgx-a100", "mi300x-8"])
def test_single_node_tree_channels_are_chains(preset: str) -> None:
    shape = GroupShape.of(resolve_topology(preset))
    assert shape.trees is not None
    pairs = shape.params("tree", 4)["parents"]
    assert len(pairs) == 4
    for pair in pairs:
        for parents in pair:
            assert len(parents) == 8
            assert _is_chain(parents)


def test_rccl_defined_trees_replace_the_chains() -> None:
    # RCCL's 16-GCD MI250X node model defines its own trees (rome_models.cc lines 376-377;
    # tests/tune/test_rccl_defined_trees.py): no chain is searched there
    shape = GroupShape.of(resolve_topology("mi250x-8"))
    assert shape.trees is None
    assert shape.defined is not None
    assert not any(_is_chain(t) for pair in shape.params("tree", 2)["parents"] for t in pair)


def test_generic_parts_keep_the_builder_trees() -> None:
    topo = resolve_topology("ualink-pod:n=16")
    assert not uses_chains(topo)
    assert GroupShape.of(topo).params("tree", 2) == {}


def test_known_answer_chain_latency_on_dgx_h100() -> None:
    """8-byte all_reduce, tree, LL, one channel, worked by hand.

    A chain of 8 GPUs reduces up 7 hops and broadcasts down 7: 14 steps, each NCCL's NVLink LL
    step 0.6 us plus the route g -> NVSwitch -> g (0.1 + 0.2 + 0.1 us, catalog estimates):
    host launch 4 + NCCL base LL 6.6 + 14 x 1.0 = 24.6 us, the same step count as the ring's
    2(n-1) = 14 (NCCL's own model: Tree 6.8 + 2 x 7 x 0.6 vs Ring 6.6 + 14 x 0.6 us). The
    binary trees over 8 ranks it replaces had depth 3: 4 + 6.6 + 6 x 1.0 = 16.6 us.
    """
    topo = resolve_topology("dgx-h100")
    tree = tune(topo, "all_reduce", 8, algo="tree", proto="ll", channels=1)
    ring = tune(topo, "all_reduce", 8, algo="ring", proto="ll", channels=1)
    assert tree.time_s == pytest.approx(24.6e-6, abs=0.01e-6)
    assert ring.time_s == pytest.approx(24.6e-6, abs=0.01e-6)
