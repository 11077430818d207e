"""What NCCL would consider: its enable rules, the candidates they leave, and vendor constants.

NCCL picks the (algorithm, protocol) of least *modelled* time among the enabled ones
(``enqueue.cc`` calling ``ncclTopoGetAlgoTime``) and the channel count from its graph search.
The enable rules applied here (prior-art §4.3):

- ``nvls`` only where every rank hangs off switches with in-switch reduction (NVLink SHARP), all
  inside one switch domain (one server, or one NVL72 rack), and only with the ``simple`` protocol
  (NVLS/NVLSTree are Simple-only in NCCL);
- ``nvls_tree`` (NCCL's NVLS_TREE) only for all_reduce across servers that each reduce in their
  switches, in equal blocks of ranks;
- both only for the dtypes and reductions the switch does, the collectives NCCL has NVLS kernels
  for, and with at least two channels (:mod:`scaleup.tune.nvls`: ``ncclNvlsSupported``, NCCL
  2.30.7 ``src/graph/tuning.cc``); NVLS all_gather / reduce_scatter never across servers;
- ``ll128`` only on NVLink-class paths (NCCL enables it up to NVB intra-node paths, never over
  PCIe-only or host-staged paths); across servers, on accelerators whose host link is
  NVLink-C2C (GB200, GB300: their NICs hang off the CPU), only while ``NCCL_LL128_C2C`` is 1
  (:func:`enabled_protocols`);
- ``hierarchical`` only when the ranks span more than one server;
- ``torus`` (rings along each dimension of a grid) only on a
  :class:`~scaleup.topology.torus.TorusTopology` whose whole torus is the group, in rank order
  (:func:`~scaleup.tune.channels.torus_group`: the builder's ``dims`` are the fabric's). It is
  not NCCL's, so under the ``nccl`` family it is kept only where the accelerators' vendor ships
  no NCCL or RCCL (:data:`~scaleup.sim.protocols.LIBRARIES`: TPUs and Trainium, catalog vendor
  ``generic``), whose own libraries (XLA on ICI, Neuron collectives) run per-dimension rings;
  its channel counts add ``2 D``, ``4 D`` ... (:func:`~scaleup.tune.channels.torus_channel_counts`)
  so that every directed link of a chip carries a lane;
- ``ring``, ``tree``, ``direct``, ``recursive`` and the other registered algorithms wherever the
  algorithm library supports the collective and the world size;
- channel counts from :func:`scaleup.tune.channels.channel_counts` (the channel search's count,
  its double and the powers of two below it).

The topology facts come from :mod:`scaleup.topology.analysis`; which candidate wins is the
search's (:mod:`scaleup.tune.search`).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from scaleup import hardware
from scaleup.collectives.algorithms import algorithms_for
from scaleup.errors import UsageError
from scaleup.sim.protocols import LIBRARIES
from scaleup.topology import analysis
from scaleup.topology.model import Topology
from scaleup.tune.channel_search import nvidia_parts
from scaleup.tune.channels import channel_counts, torus_channel_counts, torus_group
from scaleup.tune.nvls import nvls_disabled, server_block

__all__ = [
    "CHUNK_BYTES",
    "FAMILIES",
    "MAX_PIPELINE_CHUNKS",
    "step_bytes_for",
    "NCCL_ALGORITHMS",
    "Candidate",
    "candidates",
    "check_family",
    "chunks_for",
    "enabled_algorithms",
    "enabled_protocols",
]

#: Algorithms NCCL has (ring, tree, nvls, nvls_tree; CollNet/PAT if the library grows them).
#: ``hierarchical`` stands for NCCL's other multi-node compositions (tree across nodes, chains
#: or rings within).
NCCL_ALGORITHMS = frozenset({"ring", "tree", "nvls", "nvls_tree", "collnet", "pat", "hierarchical"})
#: Which of them NCCL runs per collective: the algorithms its device code implements each one
#: with (NCCL 2.30, ``src/device/broadcast.h`` and ``reduce.h``: ring only; ``all_gather.h`` and
#: ``reduce_scatter.h``: ring, NVLS, PAT, CollNet; ``all_reduce.h``: every one). Tree and our
#: hierarchical composition are all_reduce's alone.
NCCL_BY_COLLECTIVE = {
    "broadcast": frozenset({"ring"}),
    "reduce": frozenset({"ring"}),
    "all_gather": frozenset({"ring", "nvls", "collnet", "pat"}),
    "reduce_scatter": frozenset({"ring", "nvls", "collnet", "pat"}),
}
#: Algorithm families the tuner picks from: NCCL's (what nccl-tests prints) or all of ours.
FAMILIES = ("nccl", "all")
#: Bytes one pipeline step moves per channel, per protocol (NCCL's per-step buffer slot,
#: ``DEFAULT_*_BUFFSIZE`` in ``src/init.cc``: Simple 4 MiB / NCCL_STEPS 8 = 512 KiB; LL 512 KiB
#: of lines / 8, half of it data, = 32 KiB). LL128's slot holds 576,000 B of data (4,915,200 B
#: / 8 x 15/16), but an LL128 receiver polls a flag in every 128-byte line and passes lines on
#: as they land (``prims_ll128.h``), so between GPUs a hop releases its successor long before a
#: slot is full: 64 KiB stands for that finer grain (an estimate; no measured row separates
#: it). Across nodes, where the proxy sends whole slots, tree LL128 runs NCCL's own chunk
#: (:func:`scaleup.tune.size_channels.tree_ll128_chunk_bytes`).
CHUNK_BYTES = {"simple": 512 * 1024, "ll": 32 * 1024, "ll128": 64 * 1024}
#: Pipelined algorithms (tree, chains) are cut into at most this many chunks per channel. The cap
#: bounds simulation cost only: they run with ``step_bytes`` (:func:`step_bytes_for`), so the
#: pipeline fill is one protocol step per hop and a connection's latency overlaps its transfer
#: (:mod:`scaleup.sim.pipeline`); 16, 64 and 256 chunks agree within 1% once a chunk is at least
#: one step (tests/sim/test_pipeline.py).
MAX_PIPELINE_CHUNKS = 16

#: (algorithm, collective) pairs whose time benefits from cutting the message into a pipeline.
_PIPELINED = {
    ("tree", "all_reduce"),
    ("tree", "broadcast"),
    ("tree", "reduce"),
    ("ring", "broadcast"),
    ("ring", "reduce"),
    ("hierarchical", "all_reduce"),  # chunk c crosses the nodes while chunk c+1 is reduced inside
    ("nvls_tree", "all_reduce"),  # the same, with the reduction in the switches
}


@dataclass(frozen=True, order=True)
class Candidate:
    """One (algorithm, protocol, channel count) the tuner may choose."""

    algorithm: str
    protocol: str
    channels: int


def check_family(family: str) -> str:
    """``family`` if it is one of :data:`FAMILIES`, else a UsageError naming ``family``."""
    if family not in FAMILIES:
        raise UsageError(
            f"unknown algorithm family {family!r}; use {' or '.join(FAMILIES)}", source="family"
        )
    return family


def chunks_for(
    algorithm: str,
    collective: str,
    nbytes: int,
    channels: int,
    protocol: str,
    unit_bytes: float | None = None,
) -> int:
    """Pipeline depth: one chunk per protocol step slot of each channel's share (``unit_bytes``
    per chunk where given: NVLS-Tree's heads times its chunk), for pipelined algorithms (tree,
    chain broadcast/reduce, NVLS-Tree), a power of two capped at :data:`MAX_PIPELINE_CHUNKS`;
    else 1.

    >>> chunks_for("tree", "all_reduce", 1 << 30, 8, "simple")
    16
    >>> chunks_for("ring", "all_reduce", 1 << 30, 8, "simple")
    1
    >>> chunks_for("nvls_tree", "all_reduce", 1 << 27, 16, "simple", unit_bytes=8 << 17)
    8
    """
    if (algorithm, collective) not in _PIPELINED:
        return 1
    per_channel = nbytes / max(channels, 1)
    unit = CHUNK_BYTES[protocol] if unit_bytes is None else unit_bytes
    want = max(1, math.ceil(per_channel / unit))
    return int(min(MAX_PIPELINE_CHUNKS, 1 << (want - 1).bit_length()))  # a power of two


def step_bytes_for(algorithm: str, collective: str, protocol: str) -> float | None:
    """NCCL's slot size for pipelined algorithms (the simulator's ``step_bytes``), else None.

    >>> step_bytes_for("tree", "broadcast", "simple")
    524288
    >>> step_bytes_for("ring", "all_reduce", "simple") is None
    True
    """
    return CHUNK_BYTES[protocol] if (algorithm, collective) in _PIPELINED else None


def enabled_algorithms(
    topology: Topology,
    collective: str,
    ranks: Sequence[int] | None = None,
    family: str = "nccl",
    *,
    dtype: str = "float32",
    redop: str = "sum",
) -> list[str]:
    """Algorithms the library has for ``collective`` that NCCL's rules enable on this fabric
    for ``dtype`` and ``redop``.

    ``family="nccl"`` (default) keeps the algorithms NCCL has (:data:`NCCL_ALGORITHMS`), so the
    tuner predicts what nccl-tests prints; ``"all"`` adds ours (direct, recursive), which NCCL
    does not implement for these collectives. ``torus`` stays under ``"nccl"`` where the
    accelerators' vendor has no NCCL/RCCL library (:func:`_vendor_library_free`).
    """
    check_family(family)
    multi_node = len(set(analysis.rank_nodes(topology, ranks))) > 1
    domain = nvidia_domain_ranks(topology, ranks)
    out = []
    for name in algorithms_for(collective):
        if not _fabric_allows(topology, name, ranks, multi_node):
            continue
        why = nvls_disabled(name, collective, dtype=dtype, redop=redop, multi_node=multi_node,
                            family=family, domain_ranks=domain)  # fmt: skip
        if why is None:
            out.append(name)
    if family == "all":
        return out
    allowed = NCCL_BY_COLLECTIVE.get(collective, NCCL_ALGORITHMS)
    if "torus" in out and _vendor_library_free(topology, ranks):
        allowed = allowed | {"torus"}
    nccl = [a for a in out if a in allowed]
    return nccl or out  # all_to_all / send_recv: NCCL's p2p pairwise exchange is our direct


def _fabric_allows(
    topology: Topology, name: str, ranks: Sequence[int] | None, multi_node: bool
) -> bool:
    """The topology's part of the enable rules (the dtype's is :func:`nvls_disabled`)."""
    if name == "nvls":
        return analysis.nvls_capable(topology, ranks)
    if name == "nvls_tree":
        blocks = server_block(topology, ranks) is not None
        return blocks and analysis.nvls_tree_capable(topology, ranks)
    if name == "hierarchical":
        return multi_node
    if name == "torus":  # dims= the fabric's grid: the whole torus, in rank order
        return torus_group(topology, ranks) is not None
    return True


def nvidia_domain_ranks(topology: Topology, ranks: Sequence[int] | None = None) -> int:
    """The most ranks of the group on one server (NCCL's ``localRanks``: an NVL72 rack is one)
    where every part is NVIDIA's, else 0 (:func:`~scaleup.tune.nvls.nvls_disabled`)."""
    if not nvidia_parts(topology, ranks):
        return 0
    return max(Counter(analysis.rank_nodes(topology, ranks)).values(), default=0)


def _vendor_library_free(topology: Topology, ranks: Sequence[int] | None) -> bool:
    """Whether no accelerator of the group comes from a vendor with an NCCL-family library
    (:data:`~scaleup.sim.protocols.LIBRARIES`): their collectives are not NCCL's."""
    accs = topology.accelerators
    chosen = accs if ranks is None else [accs[int(r)] for r in ranks]
    return all(str(hardware.accelerator(a.type).vendor) not in LIBRARIES for a in chosen)


def enabled_protocols(
    topology: Topology,
    algorithm: str,
    ranks: Sequence[int] | None = None,
    *,
    ll128_c2c: bool = True,
) -> list[str]:
    """Protocols enabled for ``algorithm`` (NCCL's order: LL, LL128, Simple): NVLS is
    Simple-only; LL128 only on NVLink paths, and across servers of C2C-hosted accelerators
    only with ``ll128_c2c`` (``NCCL_LL128_C2C``).

    NCCL enables LL128 across nodes by the class of the path from a GPU to its NIC
    (``typeInter``; NVIDIA/nccl @5067397c src/graph/tuning.cc lines 515-526): up to PXN on
    Hopper and later while ``NCCL_LL128_C2C`` is 1 (line 235: the default), else up to PXB. A
    GPU whose host link is NVLink-C2C reaches a NIC on its CPU's PCIe over a path NCCL 2.27 and
    later class as P2C, between PXB and PXN (src/graph/paths.cc at v2.27.3-1 lines 670-680),
    so LL128 runs there; ``NCCL_LL128_C2C=0`` turns it off. NCCL 2.26 and earlier had no P2C
    class: the same path was PHB, beyond PXN (v2.26.2-1 tuning.cc line 429), and LL128 never
    ran across GB200 nodes -- what ``ll128_c2c=False`` reproduces for runs of those versions.
    """
    if algorithm in ("nvls", "nvls_tree"):
        return ["simple"]
    protos = ["ll", "simple"]
    if analysis.nvlink_class(topology, ranks) and (ll128_c2c or not _c2c_across(topology, ranks)):
        protos.insert(1, "ll128")
    return protos


def _c2c_across(topology: Topology, ranks: Sequence[int] | None) -> bool:
    """Whether ``ranks`` span servers and one of their accelerators is hosted over NVLink-C2C
    (catalog ``host_link_tech``): its NIC path is NCCL's P2C (PHB before NCCL 2.27)."""
    if len(set(analysis.rank_nodes(topology, ranks))) < 2:
        return False
    accs = topology.accelerators
    chosen = accs if ranks is None else [accs[int(r)] for r in ranks]
    return any(str(hardware.accelerator(a.type).host_link.family) == "c2c" for a in chosen)


def candidates(
    topology: Topology,
    collective: str,
    *,
    ranks: Sequence[int] | None = None,
    dtype: str = "float32",
    redop: str = "sum",
    algo: str | None = None,
    proto: str | None = None,
    channels: int | None = None,
    family: str = "nccl",
    counts: Sequence[int] | None = None,
    ll128_c2c: bool = True,
) -> list[Candidate]:
    """Every enabled candidate, narrowed by the ``algo``/``proto``/``channels`` overrides.

    An override bypasses the enable rule it names (``algorithm="nvls"`` on a fabric without
    NVLS is still tried, and fails if the algorithm cannot be built), as ``NCCL_ALGO`` does.
    The overrides are taken as given: :class:`~scaleup.tune.request.BenchRequest` validates them.
    The NVLS rules of :func:`~scaleup.tune.nvls.nvls_disabled` (the dtype and reduction the
    switch does, NCCL's channel floor) hold even for an override: NCCL finds no algorithm then,
    and so a :class:`~scaleup.errors.UsageError` says why.
    ``counts``: the channel counts to try (a session passes its searched plan's), else
    :func:`~scaleup.tune.channels.channel_counts` searched here; ``ll128_c2c``:
    ``NCCL_LL128_C2C`` (:func:`enabled_protocols`); the torus algorithm on a whole
    torus tries :func:`~scaleup.tune.channels.torus_channel_counts` of them (``NCCL_MIN/
    MAX_NCHANNELS`` do not bound the counts it adds: it is enabled only where NCCL is not the
    library).
    """
    algos = [algo] if algo is not None else enabled_algorithms(topology, collective, ranks, family)
    if channels is not None:
        counts = (channels,)
    elif counts is None:
        counts = channel_counts(topology, ranks)
    grid = torus_group(topology, ranks) if channels is None else None
    out: list[Candidate] = []
    for a in algos:
        protos = (
            [proto]
            if proto is not None
            else enabled_protocols(topology, a, ranks, ll128_c2c=ll128_c2c)
        )
        tried = torus_channel_counts(grid, counts) if a == "torus" and grid else counts
        out.extend(Candidate(a, p, c) for p in protos for c in tried)
    return _runnable(topology, collective, ranks, out, dtype=dtype, redop=redop, family=family)


def _runnable(
    topology: Topology,
    collective: str,
    ranks: Sequence[int] | None,
    cands: list[Candidate],
    **rule: str,
) -> list[Candidate]:
    """``cands`` less those the NVLS rules disable; a UsageError when that leaves none."""
    multi_node = len(set(analysis.rank_nodes(topology, ranks))) > 1
    domain = nvidia_domain_ranks(topology, ranks)
    why = {
        c: nvls_disabled(
            c.algorithm,
            collective,
            channels=c.channels,
            multi_node=multi_node,
            domain_ranks=domain,
            **rule,
        )  # fmt: skip
        for c in cands
    }
    kept = [c for c in cands if why[c] is None]
    if cands and not kept:
        raise UsageError(f"no candidate left: {why[cands[0]]}", source="algorithm")
    return kept
