"""Facts about a fabric, as pure functions over a Topology (SciPy's sparse graph routines do the
graph work: breadth-first search, spanning trees, max-flow, all in C, so a 40,000-device fabric
takes seconds).

Conventions: accelerators are named by id (``"g3"``) or by rank (``3``); bandwidths leave as GB/s
(1e9 bytes/s) **per direction**; ``hops`` counts physical links traversed (GPU -> NVSwitch -> GPU
is 2 hops, a direct NVLink 1). Paths may cross any device, including other accelerators (GPU
forwarding, as NCCL does on DGX-1), hosts and NICs.

Bisection (:func:`bisection_gb_per_s`): the minimum, over balanced bipartitions (A, B) of the
accelerators (``|A| = n // 2``), of the max-flow from all of A to all of B. Exact (every
bipartition) when there are at most :data:`EXACT_BISECTION_LIMIT` of them (n <= 12); otherwise an
**upper bound**: the minimum over structured cuts (rank halves -- servers, boards --, even/odd
ranks, blocks of 2, 4, 8 ...) and, up to :data:`RANDOM_CUTS_MAX_N` accelerators,
:data:`RANDOM_CUTS` seeded random bipartitions. Link capacities are symmetric, so one direction's
flow is computed. On the
symmetric presets (NVSwitch, NVL72, UALink pods) the structured cuts are the worst ones, so the
bound is the bisection.

Predicates the tuner's enable rules ask (:func:`nvls_capable`, :func:`nvlink_class`,
:func:`links_per_accelerator`, :func:`is_full_mesh`, :func:`rank_nodes`) take an optional
``ranks`` (indices into ``accelerators``: the group the question is about, default all) and read
the catalog's typed link fields (``family``, ``scope``), never the spelling of a name.

This module is the public home of these facts. The graph work lives in
:mod:`~scaleup.topology.paths` (hops, bottlenecks), :mod:`~scaleup.topology.flow` (max-flow,
bisection) and :mod:`~scaleup.topology.predicates` (the tuner's predicates); their public names
are re-exported here.
"""

from __future__ import annotations

import math
from typing import Any

from scaleup import hardware
from scaleup.topology.flow import (
    EXACT_BISECTION_LIMIT,
    RANDOM_CUTS,
    RANDOM_CUTS_MAX_N,
    bisection,
    bisection_gb_per_s,
    max_flow_gb_per_s,
)
from scaleup.topology.model import NodeKind, Topology
from scaleup.topology.paths import (
    ALL_PAIRS_MAX_N,
    GB,
    SAMPLED_SOURCES,
    _source_rows,
    bottleneck_gb_per_s,
    hops,
    pair_table,
    sampled_sources,
)
from scaleup.topology.predicates import (
    is_full_mesh,
    links_per_accelerator,
    nvlink_class,
    nvls_capable,
    nvls_tree_capable,
    rank_nodes,
)

__all__ = [
    "ALL_PAIRS_MAX_N",
    "EXACT_BISECTION_LIMIT",
    "RANDOM_CUTS",
    "RANDOM_CUTS_MAX_N",
    "SAMPLED_SOURCES",
    "bisection",
    "bisection_gb_per_s",
    "bottleneck_gb_per_s",
    "hops",
    "is_full_mesh",
    "is_uniform",
    "links_per_accelerator",
    "max_flow_gb_per_s",
    "max_hops",
    "nvlink_class",
    "nvls_capable",
    "nvls_tree_capable",
    "pair_table",
    "per_accelerator_gb_per_s",
    "pooled_memory_bytes",
    "rank_nodes",
    "sampled_sources",
    "scale_out",
    "summary",
]

_REL = 1e-9  # relative tolerance when comparing bandwidths summed in different orders


def is_uniform(t: Topology) -> bool:
    """Whether every accelerator pair is equidistant (hops) at equal bottleneck bandwidth
    (pairs from :func:`sampled_sources` beyond :data:`ALL_PAIRS_MAX_N` accelerators)."""
    n = len(t.accelerators)
    if n < 2:
        return True
    sources = sampled_sources(t)
    hop, width = _source_rows(t)
    h0, w0 = hop[0][1], width[0][1]
    for s, hops_row, width_row in zip(sources, hop, width, strict=True):
        for b in range(n):
            if b == s:
                continue
            if hops_row[b] != h0 or not math.isclose(width_row[b], w0, rel_tol=_REL):
                return False
    return True


def max_hops(t: Topology) -> int:
    """The largest hop count between two accelerators (from :func:`sampled_sources` beyond
    :data:`ALL_PAIRS_MAX_N` accelerators: a lower bound, exact on fabrics where every source
    sees the same distances, as fat trees and the presets' switch planes do)."""
    return max((max(row) for row in _source_rows(t)[0]), default=0)


def per_accelerator_gb_per_s(t: Topology) -> float:
    """Scale-up bandwidth of one accelerator, GB/s per direction: the sum of its channels out,
    leaving out those to hosts and NICs; the minimum over accelerators."""
    out = dict.fromkeys((d.id for d in t.accelerators), 0.0)
    kind = {d.id: d.kind for d in t.devices}
    for c in t.channels:
        if c.src in out and kind[c.dst] not in (NodeKind.HOST, NodeKind.NIC):
            out[c.src] += c.bandwidth_bytes_per_s
    return min(out.values()) / GB


def pooled_memory_bytes(t: Topology) -> int:
    """Sum of the accelerators' HBM capacity, bytes."""
    return sum(int(hardware.accelerator(d.type).hbm_bytes) for d in t.accelerators)


def scale_out(t: Topology) -> dict[str, Any] | None:
    """The scale-out fabric (switches whose ports are a ``scale-out`` link technology), or None:
    ``switch_types``, ``switches_per_tier`` (leaves, those with a NIC, first; then each tier the
    one below reaches), ``tiers``, and ``oversubscription``: the most any leaf has down (to
    NICs) per unit up (to other switches), by bandwidth; 1.0 for one switch.

    >>> from scaleup.topology import resolve_topology
    >>> scale_out(resolve_topology("16xdgx-h100"))["switches_per_tier"]
    [4, 2]
    """
    kind = {d.id: d.kind for d in t.devices}
    fabric = {
        d.id: d.type
        for d in t.switches
        if hardware.link_tech(str(hardware.switch_chip(d.type).link_tech)).scope == "scale-out"
    }
    if not fabric:
        return None
    down: dict[str, float] = {}
    up: dict[str, float] = {}
    neighbours: dict[str, list[str]] = {x: [] for x in fabric}
    for c in t.channels:
        if c.src in fabric:
            if kind[c.dst] is NodeKind.NIC:
                down[c.src] = down.get(c.src, 0.0) + c.bandwidth_bytes_per_s
            elif c.dst in fabric:
                up[c.src] = up.get(c.src, 0.0) + c.bandwidth_bytes_per_s
                neighbours[c.src].append(c.dst)
    tier = set(down)
    seen = set(tier)
    per_tier = []
    while tier:
        per_tier.append(len(tier))
        tier = {y for x in tier for y in neighbours[x] if y not in seen}
        seen |= tier
    ratios = [down[x] / up[x] for x in down if up.get(x)]
    return {
        "switch_types": sorted(set(fabric.values())),
        "tiers": len(per_tier),
        "switches_per_tier": per_tier,
        "oversubscription": max(ratios, default=1.0),
    }


def summary(t: Topology) -> dict[str, Any]:
    """The facts ``scaleup topo show --json`` prints.

    Beyond :data:`ALL_PAIRS_MAX_N` accelerators ``uniform`` and ``max_hops`` come from
    ``hop_sources`` sampled ranks (``pairs_sampled`` true), not from all O(n^2) pairs.
    """
    bisect, exact = bisection(t)
    types = sorted({d.type for d in t.accelerators})
    order = {k: i for i, k in enumerate(NodeKind)}
    counts: dict[str, int] = {}
    for d in sorted(t.devices, key=lambda d: (order[d.kind], d.type)):
        counts[d.type] = counts.get(d.type, 0) + 1
    sources = sampled_sources(t)
    return {
        "name": t.name,
        "description": t.description,
        "accelerator_types": types,
        "accelerators": len(t.accelerators),
        "switches": len(t.switches),
        "hosts": len(t.hosts),
        "nics": len(t.nics),
        "device_types": counts,
        "nodes": len(t.nodes),
        "ranks_per_node": t.ranks_per_node,
        "links": sum(x.count for x in t.links),
        "channels": len(t.channels),
        "peer_access": t.peer_access,
        "per_accelerator_gb_per_s": per_accelerator_gb_per_s(t),
        "bisection_gb_per_s": bisect,
        "bisection_exact": exact,
        "uniform": is_uniform(t),
        "max_hops": max_hops(t),
        "pairs_sampled": len(sources) < len(t.accelerators),
        "hop_sources": len(sources),
        "pooled_memory_bytes": pooled_memory_bytes(t),
        "scale_out": scale_out(t),
    }
