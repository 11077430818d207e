"""RCCL's defined trees (:mod:`scaleup.tune.rccl_trees`): rome_model_56's ``treeBase``
(ROCm/rccl @0cbce2a7 src/graph/rome_models.cc line 377) on the 16-GCD MI250X node, channel ``c``
on tree ``c mod 12`` (``ncclTreeBasePostset``, src/graph/connect.cc lines 118-212)."""

from __future__ import annotations

import pytest

from scaleup.errors import InputError
from scaleup.topology import resolve_topology
from scaleup.tune import BenchRequest, TuneSession, tune
from scaleup.tune.channels import GroupShape
from scaleup.tune.rccl_tables import ROME_MODEL_56_LINKS, ROME_MODEL_56_TREES
from scaleup.tune.rccl_trees import defined_trees, match_gpus, parse_tree_base


def _chain(parents: tuple[int, ...], top: int) -> list[int]:
    """The GCDs from ``top`` down its single-child chain."""
    out = [top]
    while kids := [r for r, p in enumerate(parents) if p == out[-1]]:
        assert len(kids) == 1
        out.append(kids[0])
    return out


def test_rome_model_56_trees_by_hand() -> None:
    """Tree 0, ``(0(1(3(2(6(7(15(14(10))))))))(4(5(13(12(8(9(11))))))))``: root 0, chains
    1-3-2-6-7-15-14-10 (8 GCDs) and 4-5-13-12-8-9-11 (7); the other 11 the same shape."""
    trees = parse_tree_base(ROME_MODEL_56_TREES, 16)
    assert len(trees) == 12
    assert trees[0].index(-1) == 0
    assert _chain(trees[0], 1) == [1, 3, 2, 6, 7, 15, 14, 10]
    assert _chain(trees[0], 4) == [4, 5, 13, 12, 8, 9, 11]
    links = {frozenset((a, b)) for a, b, _ in ROME_MODEL_56_LINKS}
    for parents in trees:
        root = parents.index(-1)
        kids = [r for r, p in enumerate(parents) if p == root]
        assert sorted(len(_chain(parents, k)) for k in kids) == [7, 8]
        assert all(frozenset((r, p)) in links for r, p in enumerate(parents) if p >= 0)


def test_tree_base_errors() -> None:
    assert parse_tree_base("(2(0)(1))", 3) == ((2, 2, -1),)
    for bad in ("(0(1)", "(0(1))(2)", "(0(1)(1))", "(0(5))", "0(1)", "(0(1)(2)(3)(4))"):
        with pytest.raises(InputError):
            parse_tree_base(bad, 5 if "4" in bad else 3)


def test_mi250x_node_matches_rome_model_56_as_numbered() -> None:
    """The preset wires the GCDs as the model numbers them (machines.MI250X_16_LINKS): the
    first renaming that matches is the identity, so the trees are the model's."""
    topo = resolve_topology("mi250x-8")
    assert defined_trees(topo) == parse_tree_base(ROME_MODEL_56_TREES, 16)
    assert defined_trees(resolve_topology("mi300x-8")) is None  # rome_model_79 defines none
    assert defined_trees(resolve_topology("2xmi300x-8")) is None
    assert defined_trees(topo, list(range(8))) is None  # half a node: no node model


def test_renamed_gcds_get_renamed_trees() -> None:
    """The group in reverse order: every tree is the model's under the matched renaming ``g``,
    and its edges are xGMI links of the group."""
    topo = resolve_topology("mi250x-8")
    ranks = list(range(15, -1, -1))
    trees = defined_trees(topo, ranks)
    assert trees is not None
    conn = [[0] * 16 for _ in range(16)]
    for a, b, n in ROME_MODEL_56_LINKS:
        conn[15 - a][15 - b] = conn[15 - b][15 - a] = n
    g = match_gpus(ROME_MODEL_56_LINKS, conn)
    assert g is not None
    for model, renamed in zip(parse_tree_base(ROME_MODEL_56_TREES, 16), trees, strict=True):
        assert all(renamed[g[k]] == (-1 if p < 0 else g[p]) for k, p in enumerate(model))
        assert all(conn[r][p] > 0 for r, p in enumerate(renamed) if p >= 0)


def test_tree_channels_ride_defined_trees_and_subsets_chains() -> None:
    """Channel k rides defined tree k mod 12 (both halves); a part of the node matches no node
    model, so RCCL searches it as NCCL does: chains."""
    topo = resolve_topology("mi250x-8")
    trees = defined_trees(topo)
    assert trees is not None
    pairs = GroupShape.of(topo).params("tree", 14)["parents"]
    assert pairs == [[list(trees[k % 12])] * 2 for k in range(14)]
    part = GroupShape.of(topo, list(range(8)))
    assert part.defined is None
    assert part.trees is not None


def test_one_channel_uses_tree_zero_links_only() -> None:
    """Tree all_reduce on one channel: exactly tree 0's 15 edges carry bytes, both ways."""
    topo = resolve_topology("mi250x-8")
    choice = tune(topo, "all_reduce", 1 << 20, algo="tree", proto="ll", channels=1)
    ids = [a.id for a in topo.accelerators]
    used = {
        (ids.index(c.src), ids.index(c.dst))
        for c, b in zip(topo.channels, choice.result.channel_bytes, strict=True)
        if b > 0
    }
    tree0 = parse_tree_base(ROME_MODEL_56_TREES, 16)[0]
    edges = {e for r, p in enumerate(tree0) if p >= 0 for e in ((r, p), (p, r))}
    assert used == edges


def test_known_answer_small_all_reduce_on_the_defined_tree() -> None:
    """8-byte all_reduce on mi250x-8: RCCL's pivot rule (enqueue.cc lines 1697-1718) runs Tree
    LL, on 12 of our channels (the most candidates under its 24); every tree has depth 8.

    By hand: host launch 4 us + RCCL's Tree LL base latency 12 us (tuning.cc lines 57-60) +
    16 steps x (xGMI LL step 1.5 us, tuning_model_1 line 108, + link 0.1 us, catalog estimate)
    = 4 + 12 + 16 x 1.6 = 41.6 us. 16 = 2 x 8: 8 hops up and 8 down the 8-GCD chain; the root
    takes its two chains' sums in one step, as RCCL's LL primitives read every child at once
    (src/device/prims_ll.h lines 188-191, 442-459). Reduced one after the other, as the tree
    builder did before, they cost a 17th step: 43.2 us. The binary trees over the ranks this
    replaces: 34.8 us.
    """
    topo = resolve_topology("mi250x-8")
    choice = TuneSession().sweep(topo, BenchRequest(sizes_bytes=(8,)))[0]
    assert (choice.algorithm, choice.protocol, choice.channels) == ("tree", "ll", 12)
    assert choice.time_s == pytest.approx(41.6e-6, abs=0.01e-6)
    one = tune(topo, "all_reduce", 8, algo="tree", proto="ll", channels=1)
    assert one.time_s == pytest.approx(41.6e-6, abs=0.01e-6)
