"""RCCL's defined trees: the trees a node model with ``treeDefined=1`` gives every tree channel.

ROCm/rccl @0cbce2a7. A node model's ``options`` may set ``treeDefined=1`` (parsed in
src/graph/rome_models.cc lines 1375-1376) and give a ``treeBase`` string: trees separated by
``|``, each node written ``(gpu`` followed by its subtrees and ``)``; rome_model_56, 16 MI250X
GCDs (lines 366-378), gives 12, each a root with two chains of 8 and 7 GCDs
(:data:`~scaleup.tune.rccl_tables.ROME_MODEL_56_TREES`): a path through every GCD held near its
middle, depth 8 where a chain has 15. RCCL then:

- matches the node: ``parse1H16P`` (lines 2106-2241) tries permutations ``g16`` of the node's
  GPUs (each NUMA node's GPUs permuted in lexicographic order, lines 2140-2183) until the
  model's ``connMatrix`` (xGMI links between GPUs) equals the node's under it (lines
  2186-2196): model GPU ``k`` is the node's GPU ``g16[k]`` (:func:`match_gpus`);
- copies the tree string with every model GPU renamed ``g16[k]`` (``parseGraphLight``, lines
  1257-1332; line 2237) into the tree graph;
- after ``ncclTopoPostset`` has laid and duplicated the channels (src/init.cc lines 1635-1636),
  ``ncclTreeBasePostset`` (src/graph/connect.cc lines 118-212) gives channel ``c`` of
  ``comm->nChannels`` tree ``c mod x`` of the ``x`` trees: ``tree.up`` the enclosing GPU,
  ``tree.down`` the GPUs opening its subtrees (at most ``NCCL_MAX_TREE_ARITY`` 3,
  src/include/device.h line 168), replacing the chain ``ncclTopoPreset`` made.

So every tree channel runs a defined tree (:func:`defined_trees`), on one node only: the model
has no NIC, and several MI250X nodes match rome_model_59 / _65, which define none. The node
models of the catalog's other AMD nodes (MI300X: 79, 81; MI355X: none) define no trees.
"""

from __future__ import annotations

from collections.abc import Sequence

from scaleup.errors import InputError
from scaleup.topology.model import Topology
from scaleup.tune.rccl_inputs import rccl_model_inputs, xgmi_links

__all__ = ["MAX_TREE_ARITY", "defined_trees", "match_gpus", "parse_tree_base"]

#: ``NCCL_MAX_TREE_ARITY`` (rccl src/include/device.h line 168): children a tree node keeps.
MAX_TREE_ARITY = 3


def parse_tree_base(text: str, gpus: int) -> tuple[tuple[int, ...], ...]:
    """Each ``|``-separated tree of a ``treeBase`` string as a parent array over GPUs
    ``0..gpus-1`` (the root's parent -1), as ``ncclTreeBasePostset`` reads it: a GPU's parent
    is the GPU whose parenthesis encloses it, its children the GPUs opening its subtrees.

    >>> parse_tree_base("(4(2(3)(1))(0))", 5)
    ((4, 2, 4, 2, -1),)
    """
    trees = []
    for part in text.split("|"):
        parents = [-2] * gpus
        stack: list[int] = []
        pos = 0
        while pos < len(part):
            char = part[pos]
            if char == ")" and stack:
                stack.pop()
                pos += 1
                continue
            end = pos + 1
            while end < len(part) and part[end].isdigit():
                end += 1
            gpu = int(part[pos + 1 : end]) if char == "(" and end > pos + 1 else -1
            if not 0 <= gpu < gpus or parents[gpu] != -2 or (not stack and pos):
                raise InputError(f"treeBase {part!r}: bad tree at {pos}", source="treeBase")
            parents[gpu] = stack[-1] if stack else -1
            stack.append(gpu)
            pos = end
        too_wide = any(parents.count(g) > MAX_TREE_ARITY for g in range(gpus))
        if stack or -2 in parents or too_wide:
            raise InputError(f"treeBase {part!r}: not a tree over {gpus} GPUs", source="treeBase")
        trees.append(tuple(parents))
    return tuple(trees)


def match_gpus(
    model: Sequence[tuple[int, int, int]], node: Sequence[Sequence[int]]
) -> tuple[int, ...] | None:
    """The first permutation ``g`` in lexicographic order with ``node[g[k]][g[m]]`` equal to
    the model's links between GPUs ``k`` and ``m`` for every pair (``parse1H16P``'s test, lines
    2186-2196), or None. ``model``: (GPU, GPU, links) pairs; ``node``: a link-count matrix.
    The topology holds no NUMA nodes, so every GPU is a candidate for every model GPU (RCCL
    permutes within each NUMA node; the two agree where the first match keeps each GPU's NUMA
    node, as the identity does).

    >>> match_gpus([(0, 1, 2), (1, 2, 1)], [[0, 1, 0], [1, 0, 2], [0, 2, 0]])
    (2, 1, 0)
    """
    n = len(node)
    want = [[0] * n for _ in range(n)]
    for a, b, links in model:
        want[a][b] = want[b][a] = links
    g: list[int] = []
    used = [False] * n
    nxt = [0] * (n + 1)  # the next candidate to try at each depth
    while True:
        k = len(g)
        if k == n:
            return tuple(g)
        cand = next(
            (
                c
                for c in range(nxt[k], n)
                if not used[c] and all(node[c][g[m]] == want[k][m] for m in range(k))
            ),
            None,
        )
        if cand is None:
            if not g:
                return None
            used[g.pop()] = False
            continue
        nxt[k], nxt[k + 1] = cand + 1, 0
        used[cand] = True
        g.append(cand)


def defined_trees(
    topology: Topology, ranks: Sequence[int] | None = None
) -> tuple[tuple[int, ...], ...] | None:
    """RCCL's defined trees of ``ranks`` of ``topology`` (default every accelerator) as parent
    arrays over the group's positions, tree ``c mod x`` for channel ``c``; None where the node
    model RCCL matches (:func:`~scaleup.tune.rccl_inputs.rccl_model_inputs`) defines none, or
    the group's xGMI links are not its ``connMatrix`` under any renaming.

    >>> from scaleup.topology import resolve_topology
    >>> trees = defined_trees(resolve_topology("mi250x-8"))
    >>> len(trees), trees[0].index(-1), [r for r, p in enumerate(trees[0]) if p == 0]
    (12, 0, [1, 4])
    >>> defined_trees(resolve_topology("mi300x-8")) is None
    True
    """
    inputs = rccl_model_inputs(topology, ranks)
    node = None if inputs is None else inputs.rccl
    if node is None or not (node.tree_defined and node.tree_base):
        return None
    accs = topology.accelerators
    ids = [a.id for a in accs] if ranks is None else [accs[int(r)].id for r in ranks]
    links = xgmi_links(topology, set(ids))
    conn = [[links[a].get(b, 0) for b in ids] for a in ids]
    g = match_gpus(node.links, conn)
    if g is None:
        return None
    out = []
    for parents in parse_tree_base(node.tree_base, node.gpus):
        renamed = [-1] * len(ids)
        for k, p in enumerate(parents):
            renamed[g[k]] = -1 if p < 0 else g[p]
        out.append(tuple(renamed))
    return tuple(out)
