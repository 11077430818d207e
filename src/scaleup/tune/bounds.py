"""Proven lower bounds of a candidate's simulated time, without building its schedule.

The search (:mod:`scaleup.tune.search`) orders and prunes candidates by a time the simulator can
never beat. :func:`lower_bound_s` gives one for a candidate (algorithm, protocol, channels) of a
collective on a group of ranks at ``count`` elements from the algorithm's structure alone (its
ring orders and tree parents: the builder parameters the session passes, from its
:class:`~scaleup.tune.channels.GroupShape`), so no op table is built. It is the collective's
start (host launch plus the library's base latency, exactly as
:meth:`~scaleup.sim.CompiledSchedule.start_s`) plus the larger of

- **bandwidth**: for a set of channels ``C`` (the channels out of or into one rank, out of or into
  one server, a rank's links to its NVLS switches) every op puts ``bytes x use`` on them, and
  each carries at most its capacity per second, so the run lasts at least
  ``sum(bytes x use on C) / sum(capacity of C)``. A transfer's route is a flow (its fractions on
  any cut between its ends sum to at least 1), a channel's ``use`` is ``1 / payload efficiency``
  (``x 1/NVLS efficiency`` for switch reductions), so it suffices to know the bytes that cross
  ``C``. Likewise each op's bytes count once against its issuing rank's thread block on its channel
  tag, capped at ``cta_bytes_per_s``: at least ``total fabric bytes / (ranks x tags x cap)``;
- plus, on the bandwidth term, the first op's step latency: no op moves a byte before it;
- **latency**: a chain of ``k`` dependent fabric ops; each pays at least the smallest step latency
  of the protocol (its link class's, plus the route's, which is >= 0) after its predecessor
  released it, which is never before the predecessor started moving bytes (cut-through included).
  For algorithms run without ``step_bytes`` (ring) every op of the chain also moves its bytes
  before releasing the next, at most at one thread block's rate: ``k (alpha + block / cap)``.

The bytes come from the algorithm's structure (docs/models.md, "Lower bounds"); where the
structure is not modelled here, the collective's algorithm-independent minimum stands (every
element of a rank's all_reduce input leaves the rank, every rank of a broadcast receives the
message, ...). Every term is divided by a factor slightly above 1 so that float rounding of an
exact bound (one saturated link) stays below the simulated time.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from scaleup import hardware
from scaleup.collectives.algorithms.tree import dtree_parents
from scaleup.collectives.spec import itemsize
from scaleup.sim import params as P
from scaleup.sim.network import Network
from scaleup.sim.protocols import for_topology, protocol
from scaleup.topology.model import NodeKind, Topology
from scaleup.tune.rules import Candidate, step_bytes_for

__all__ = ["GroupFabric", "lower_bound_s"]

#: Float safety margin: every bound is divided by this (rounding in the simulator's sums).
_MARGIN = 1.0 + 1e-9
#: The p2p link classes of :data:`scaleup.sim.network.LINK_CLASSES` (local ops pay none).
_P2P_CLASSES = ("nvlink", "pci", "net")


@dataclass(frozen=True, eq=False)
class GroupFabric:
    """Capacities (payload bytes/s at protocol efficiency 1) around one group of ranks.

    ``egress``/``ingress``: per rank, its accelerator's channels out/in; ``nvls_out``/``nvls_in``:
    per rank, its channels to/from switches with in-switch reduction; ``node_of_rank``: each
    rank's server as an index into ``node_out``/``node_in``, the channels leaving/entering the
    devices of that server. ``peer_access`` False: transfers are host-staged over virtual links,
    so only the thread-block and latency terms hold.
    """

    nranks: int
    egress: np.ndarray
    ingress: np.ndarray
    nvls_out: np.ndarray
    nvls_in: np.ndarray
    node_of_rank: np.ndarray
    node_out: np.ndarray
    node_in: np.ndarray
    archs: tuple[str, ...]
    peer_access: bool

    @classmethod
    def of(
        cls, topology: Topology, group: Sequence[int] | None, network: Network | None = None
    ) -> GroupFabric:
        """The capacities of ``group`` (accelerator indices; None: all) on ``topology``."""
        net = Network(topology) if network is None else network
        accs = topology.accelerators
        ranks = np.arange(len(accs)) if group is None else np.asarray(group, dtype=np.int64)
        dev = net.acc_devices[ranks]
        cap, src, dst = net.ch_capacity, net.ch_src, net.ch_dst
        n_dev = net.n_devices
        out_dev = np.bincount(src, weights=cap, minlength=n_dev)
        in_dev = np.bincount(dst, weights=cap, minlength=n_dev)
        devices = topology.devices
        nvls = np.array([d.kind is NodeKind.SWITCH
                         and bool(hardware.switch_chip(d.type).in_switch_reduction)
                         for d in devices])  # fmt: skip
        nvls_out = np.bincount(src, weights=cap * nvls[dst], minlength=n_dev)
        nvls_in = np.bincount(dst, weights=cap * nvls[src], minlength=n_dev)
        node_dev = np.array([int(d.node) for d in devices], dtype=np.int64)
        nodes, node_of_rank = np.unique(node_dev[dev], return_inverse=True)
        where = np.searchsorted(nodes, node_dev)
        member = (where < len(nodes)) & (nodes[np.minimum(where, len(nodes) - 1)] == node_dev)
        dev_node = np.where(member, where, -1)
        cross = dev_node[src] != dev_node[dst]
        node_out = np.bincount(
            dev_node[src][cross & (dev_node[src] >= 0)],
            weights=cap[cross & (dev_node[src] >= 0)], minlength=len(nodes),
        )  # fmt: skip
        node_in = np.bincount(
            dev_node[dst][cross & (dev_node[dst] >= 0)],
            weights=cap[cross & (dev_node[dst] >= 0)], minlength=len(nodes),
        )  # fmt: skip
        archs = tuple(sorted({str(hardware.accelerator(accs[int(r)].type).arch) for r in ranks}))
        return cls(
            len(ranks), out_dev[dev], in_dev[dev], nvls_out[dev], nvls_in[dev],
            node_of_rank.astype(np.int64), node_out, node_in, archs, bool(topology.peer_access),
        )  # fmt: skip

    @property
    def n_nodes(self) -> int:
        return len(self.node_out)


def _cut_s(load: np.ndarray, capacity: np.ndarray) -> float:
    """max over cuts of bytes / capacity (0 where nothing must cross)."""
    load = np.asarray(load, dtype=np.float64)
    need = load > 0
    if not need.any():
        return 0.0
    if np.any(capacity[need] <= 0):
        return 0.0  # no capacity: the simulator raises; no bound claimed
    return float((load[need] / capacity[need]).max())


def _tree_loads(
    fabric: GroupFabric, trees: list[tuple[list[int], float]]
) -> tuple[np.ndarray, np.ndarray]:
    """Per-rank and per-node bytes out of an all_reduce up-and-down ``trees`` (parent arrays
    over the ranks, each with the bytes it carries): a rank sends its piece to its parent (the
    reduction) and to each child (the broadcast); equally it receives one per tree edge, so the
    loads in and out are equal."""
    rank = np.zeros(fabric.nranks)
    node = np.zeros(fabric.n_nodes)
    for parents, piece in trees:
        par = np.asarray(parents, dtype=np.int64)
        child = np.flatnonzero(par >= 0)
        deg = np.bincount(child, minlength=fabric.nranks) + np.bincount(
            par[child], minlength=fabric.nranks
        )
        rank += deg * piece
        nc, npar = fabric.node_of_rank[child], fabric.node_of_rank[par[child]]
        x = nc != npar
        node += piece * (
            np.bincount(nc[x], minlength=fabric.n_nodes)
            + np.bincount(npar[x], minlength=fabric.n_nodes)
        )
    return rank, node


def _depth(parents: Sequence[int]) -> int:
    """Edges on the longest leaf-to-root path of a tree given by its parent array (every rank
    walks up one level per round, all at once)."""
    par = np.asarray(parents, dtype=np.int64)
    cur = np.flatnonzero(par >= 0)
    depth = 0
    while len(cur):
        depth += 1
        cur = par[cur]
        cur = cur[par[cur] >= 0]
    return depth


@dataclass
class _Terms:
    """Per-rank / per-server bytes that must cross (out, in), total thread-block bytes and tags,
    and the dependent chain; each None or 0 where not modelled."""

    rank_out: np.ndarray | float = 0.0
    rank_in: np.ndarray | float = 0.0
    node_out: np.ndarray | float = 0.0
    node_in: np.ndarray | float = 0.0
    nvls_out: float = 0.0  # per rank, on its NVLS switch links, x 1/NVLS efficiency
    nvls_in: float = 0.0
    fabric_bytes: float = 0.0
    tags: int = 0
    chain: int = 0  # dependent p2p ops
    switch_chain: int = 0  # dependent switch reductions
    chain_bytes: float = 0.0  # bytes each chain op moves when the algorithm is not pipelined
    any_chain: int = 0  # dependent ops that may be either
    switch_only: bool = False  # every fabric op is a switch reduction (nvls)


def _whole_blocks(fabric: GroupFabric, g: int) -> bool:
    """The ranks form servers of ``g`` consecutive ranks, one block per server."""
    n = fabric.nranks
    if g <= 0 or n % g:
        return False
    blocks = fabric.node_of_rank.reshape(n // g, g)
    return bool((blocks == blocks[:, :1]).all() and len(set(blocks[:, 0].tolist())) == n // g)


def _generic(collective: str, fabric: GroupFabric, s: float, root: int) -> _Terms:
    """The collective's algorithm-independent minimum: what must leave and enter each rank and
    server whatever the algorithm (every output element depends on other ranks' inputs)."""
    n, k = fabric.nranks, fabric.n_nodes
    node = fabric.node_of_rank
    m_v = np.bincount(node, minlength=k).astype(np.float64)  # ranks per server
    t = _Terms(any_chain=1)
    if collective == "all_reduce":
        t.rank_out = t.rank_in = s
        t.node_out = t.node_in = s if k > 1 else 0.0
    elif collective == "reduce_scatter":
        t.rank_out, t.rank_in = (n - 1) / n * s, s / n
        t.node_out, t.node_in = (n - m_v) / n * s, m_v / n * s
    elif collective == "all_gather":
        t.rank_out, t.rank_in = s / n, (n - 1) / n * s
        t.node_out, t.node_in = m_v / n * s, (n - m_v) / n * s
    elif collective == "all_to_all":
        t.rank_out = t.rank_in = (n - 1) / n * s
        t.node_out = t.node_in = m_v * (n - m_v) / n * s
    elif collective in ("broadcast", "reduce"):
        one = np.zeros(n)
        one[root] = s
        others = np.where(np.arange(n) == root, 0.0, s)
        at_root = np.bincount(node, weights=one, minlength=k)
        not_root = np.where(at_root > 0, 0.0, s)
        sender, receiver = (one, others) if collective == "broadcast" else (others, one)
        t.rank_out, t.rank_in = sender, receiver
        t.node_out, t.node_in = (
            (at_root, not_root) if collective == "broadcast" else (not_root, at_root)
        )
    return t


def _terms(
    collective: str,
    cand: Candidate,
    fabric: GroupFabric,
    params: Mapping[str, Any],
    s: float,
    root: int,
) -> _Terms:
    """What ``cand`` must move and wait for (see the module)."""
    n, ch, alg = fabric.nranks, cand.channels, cand.algorithm
    generic = _generic(collective, fabric, s, root)
    if collective == "all_reduce" and alg == "ring":
        orders = params.get("orders") or [list(range(n))] * ch
        per_edge = 2 * (n - 1) / n * s / ch
        node = fabric.node_of_rank
        node_out = np.zeros(fabric.n_nodes)
        node_in = np.zeros(fabric.n_nodes)
        for order in orders:
            a = node[np.asarray(order, dtype=np.int64)]
            b = np.roll(a, -1)
            x = a != b
            node_out += per_edge * np.bincount(a[x], minlength=fabric.n_nodes)
            node_in += per_edge * np.bincount(b[x], minlength=fabric.n_nodes)
        return _Terms(
            2 * (n - 1) / n * s, 2 * (n - 1) / n * s, node_out, node_in,
            fabric_bytes=2 * (n - 1) * s, tags=ch, chain=2 * (n - 1), chain_bytes=s / (n * ch),
        )  # fmt: skip
    if collective in ("reduce_scatter", "all_gather") and alg == "ring":
        t = generic
        t.fabric_bytes, t.tags = (n - 1) * s, ch
        t.chain, t.chain_bytes, t.any_chain = n - 1, s / (n * ch), 0
        return t
    if collective == "all_reduce" and alg == "tree":
        given = params.get("parents")
        pairs = given if given else [list(dtree_parents(n))]
        lanes = [(pairs[k % len(pairs)][i], s / (2 * ch)) for k in range(ch) for i in (0, 1)]
        rank, node = _tree_loads(fabric, lanes)
        depth = max(_depth(p) for pair in pairs for p in pair)
        return _Terms(rank, rank, node, node, fabric_bytes=2 * (n - 1) * s, tags=2 * ch,
                      chain=2 * depth)  # fmt: skip
    if collective == "all_reduce" and alg == "nvls":
        arch = fabric.archs[0] if len(fabric.archs) == 1 else "default"
        inflate = 1.0 / P.NVLS_EFFICIENCY.get(P.ARCH_ALIASES.get(arch, "default"),
                                              P.NVLS_EFFICIENCY["default"])  # fmt: skip
        if len(fabric.archs) > 1:
            inflate = 1.0  # mixed parts: the smallest inflation (>= 1)
        t = generic
        t.nvls_out = t.nvls_in = s * (1 + 1 / n) * inflate
        t.fabric_bytes, t.tags, t.any_chain, t.switch_chain = s, ch, 0, 1
        t.switch_only = True
        return t
    if collective == "all_reduce" and alg == "hierarchical":
        g = int(params.get("ranks_per_node", 8))
        if g <= 0 or n % g:
            return generic
        m = n // g
        per_rank = 2 * (g - 1) / g * s + 2 * (m - 1) / m * s / g
        t = _Terms(per_rank, per_rank, fabric_bytes=2 * m * (g - 1) * s + 2 * (m - 1) * s,
                   tags=ch, chain=2 * (g - 1) + 2 * (m - 1))  # fmt: skip
        if _whole_blocks(fabric, g):
            t.node_out = t.node_in = 2 * (m - 1) / m * s
        else:
            t.node_out, t.node_in = generic.node_out, generic.node_in
        return t
    if collective == "all_reduce" and alg == "nvls_tree":
        g = int(params.get("ranks_per_node") or n)
        if g <= 0 or n % g or not _whole_blocks(fabric, g):
            return generic
        m = n // g
        dtrees = dtree_parents(m)  # channel c rides tree c % 2
        per_tree = [sum(1 for c in range(ch) if c % 2 == i) * s / ch for i in (0, 1)]
        server = np.zeros(m)
        for i, parents in enumerate(dtrees):
            par = np.asarray(parents, dtype=np.int64)
            child = np.flatnonzero(par >= 0)
            deg = np.bincount(child, minlength=m) + np.bincount(par[child], minlength=m)
            server += deg * per_tree[i]
        node = np.zeros(fabric.n_nodes)
        node[fabric.node_of_rank[::g]] = server  # block b is server b's ranks
        depth = max(_depth(p) for p in dtrees)
        t = _Terms(generic.rank_out, generic.rank_in, node, node, tags=ch,
                   fabric_bytes=2 * m * s + 2 * (m - 1) * s, chain=2 * depth,
                   switch_chain=2)  # fmt: skip
        arch = fabric.archs[0] if len(fabric.archs) == 1 else "default"
        inflate = 1.0 / P.NVLS_EFFICIENCY.get(P.ARCH_ALIASES.get(arch, "default"),
                                              P.NVLS_EFFICIENCY["default"])  # fmt: skip
        t.nvls_out = t.nvls_in = s * (inflate if len(fabric.archs) == 1 else 1.0)
        return t
    return generic


def lower_bound_s(
    topology: Topology,
    group: Sequence[int] | None,
    fabric: GroupFabric,
    collective: str,
    cand: Candidate,
    count: float,
    *,
    params: Mapping[str, Any],
    dtype: str = "float32",
    root: int = 0,
) -> float:
    """A time the simulator never beats for ``cand`` running ``collective`` of ``count``
    elements of ``dtype`` on ``group`` (see the module for the terms and why each holds).
    ``params``: the builder parameters the candidate's schedule would be built with (ring
    ``orders``, tree ``parents``, ``ranks_per_node``; :meth:`GroupShape.params
    <scaleup.tune.channels.GroupShape.params>`), the builders' defaults where absent.

    Examples
    --------
    >>> from scaleup.topology import resolve_topology
    >>> t = resolve_topology("dgx-h100")
    >>> ring = Candidate("ring", "simple", 16)
    >>> bound = lower_bound_s(t, None, GroupFabric.of(t, None), "all_reduce", ring, 1 << 28,
    ...                       params={})
    >>> round(bound * 1e6)  # 2 x 7/8 x 1 GiB over 18 NVLink4 links at 20.6 GB/s, plus launch
    5083
    """
    proto = for_topology(protocol(cand.protocol), topology, group)
    nvls = cand.algorithm in ("nvls", "nvls_tree")
    start = P.KERNEL_LAUNCH_S + (0.0 if nvls else proto.launch_latency_s)
    n = fabric.nranks
    if n < 2 or collective == "send_recv":
        return start / _MARGIN
    s = float(count) * itemsize(dtype)
    t = _terms(collective, cand, fabric, params, s, root)
    eff = proto.payload_efficiency
    cta = max(proto.cta_bytes_per_s(a) for a in fabric.archs)
    bw = 0.0
    if fabric.peer_access:
        n_out = np.broadcast_to(np.asarray(t.node_out, dtype=np.float64), fabric.node_out.shape)
        n_in = np.broadcast_to(np.asarray(t.node_in, dtype=np.float64), fabric.node_in.shape)
        r_out = np.broadcast_to(np.asarray(t.rank_out, dtype=np.float64), fabric.egress.shape)
        r_in = np.broadcast_to(np.asarray(t.rank_in, dtype=np.float64), fabric.ingress.shape)
        bw = max(
            _cut_s(r_out, fabric.egress), _cut_s(r_in, fabric.ingress),
            _cut_s(n_out, fabric.node_out) if fabric.n_nodes > 1 else 0.0,
            _cut_s(n_in, fabric.node_in) if fabric.n_nodes > 1 else 0.0,
            _cut_s(np.full(n, t.nvls_out), fabric.nvls_out),
            _cut_s(np.full(n, t.nvls_in), fabric.nvls_in),
        ) / eff  # fmt: skip
    if t.tags > 0 and cta > 0:
        bw = max(bw, t.fabric_bytes / (n * t.tags * cta))
    alpha = min(float(proto.step_latency_s.get(c, 0.0)) for c in _P2P_CLASSES)
    switch = P.SWITCH_STEP_LATENCY_S
    latency = t.chain * alpha + t.any_chain * min(alpha, switch) + t.switch_chain * switch
    if t.chain_bytes > 0 and step_bytes_for(cand.algorithm, collective, cand.protocol) is None:
        latency += t.chain * t.chain_bytes / cta  # each op moves its block, then releases
    # no op moves a byte before it has paid its own step latency after the start
    first = P.SWITCH_STEP_LATENCY_S if t.switch_only else min(alpha, switch)
    return start + max(first + bw if bw > 0 else 0.0, latency) / _MARGIN
