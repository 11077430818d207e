"""NCCL's own cost model: the time its tuner predicts for each (algorithm, protocol), and its pick.

NCCL does not time its candidates: ``ncclTopoTuneModel`` (``src/graph/tuning.cc``) fills, once
per communicator, a bandwidth and a latency for every (collective, algorithm, protocol) from the
graphs its topology search found (per-channel bandwidth ``bwIntra``/``bwInter``, ``nChannels``,
the intra-node link type), the node and rank counts and per-architecture constants;
``ncclTopoGetAlgoTime`` turns them into a time for a message size; ``updateCollCostTable`` and
``topoGetAlgoInfo`` (``src/enqueue.cc``) take the least time, first in (algorithm, protocol)
order on ties. This module is that arithmetic, nothing else: its inputs (:class:`Graph`,
:class:`ModelInputs`) come from :mod:`scaleup.tune.nccl_inputs`, and the selection mode that
times NCCL's pick is :class:`scaleup.tune.choose.SizePass` (``selection="nccl-model"``).

Sources: NVIDIA/nccl @5067397c (2.30.7, ``makefiles/version.mk``), ``src/graph/tuning.cc``
(line numbers below), ``src/enqueue.cc`` lines 1989-2120. Bandwidths are in GB/s and latencies
in microseconds, as NCCL keeps them; :func:`algo_time_us` returns microseconds.

RCCL (AMD systems) runs the same arithmetic with its own constants: where
:attr:`ModelInputs.rccl` holds the node model RCCL matched, ``model_entry``, the latencies and
``algo_time_us`` take RCCL's branch of ``ncclTopoTuneModel`` / ``ncclTopoGetAlgoTime``
(ROCm/rccl @0cbce2a7, ``src/graph/tuning.cc`` lines 303-469, 632-670;
:mod:`scaleup.tune.rccl_tables`).

Not modelled: CollNet (no SHARP in the scale-out fabric here), tuner plugins, the fp8 x1024
penalty of deep rings (enqueue.cc lines 2016-2021), ``NCCL_NET_OVERHEAD``, Power CPUs (tuning.cc
lines 279-282), aggregated launches (``numPipeOps`` is 1).

Examples
--------
>>> ring = Graph(n_channels=12, bw_intra=30.0, bw_inter=30.0)
>>> m = ModelInputs(nranks=8, nnodes=1, arch="hopper", graphs={"ring": ring}, comm_channels=24)
>>> round(algo_time_us(m, "all_reduce", "ring", "simple", 1 << 30), 1)  # 56 us + 1 GiB / 205.7 GB/s
5275.6
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Final

from scaleup.errors import UsageError
from scaleup.sim import params as P
from scaleup.tune import rccl_tables as R

__all__ = [
    "ALGO_ORDER",
    "ARCH_INDEX",
    "COLLECTIVE_ALGOS",
    "LL_MAX_BWS",
    "NVLS_EFFICIENCY",
    "PER_CH_MAX_NVLS_TREE_BWS",
    "PER_CH_MAX_RING_LL128_BWS",
    "PER_CH_MAX_TREE_BWS",
    "PER_CH_MAX_TREE_LL128_BWS",
    "PROTO_ORDER",
    "TREE_CORRECTION",
    "Graph",
    "ModelEntry",
    "ModelInputs",
    "algo_time_us",
    "cost_table",
    "model_entry",
    "nccl_pick",
]

#: NCCL's algorithm order (``NCCL_ALGO_TREE`` 0, RING 1, COLLNET_DIRECT 2, COLLNET_CHAIN 3, NVLS
#: 4, NVLS_TREE 5, PAT 6; ``src/include/device.h``): the order ``topoGetAlgoInfo`` scans, so the
#: first of two equal times wins. CollNet is not modelled (no SHARP here).
ALGO_ORDER: Final = ("tree", "ring", "nvls", "nvls_tree", "pat")
#: NCCL's protocol order (``NCCL_PROTO_LL`` 0, LL128 1, SIMPLE 2).
PROTO_ORDER: Final = ("ll", "ll128", "simple")
#: Which algorithms ``ncclTopoTuneModel`` fills per collective (tuning.cc lines 294-300):
#: broadcast and reduce ring only; all_gather and reduce_scatter ring, NVLS, PAT (and CollNet
#: Direct); all_reduce everything but PAT.
COLLECTIVE_ALGOS: Final = MappingProxyType(
    {
        "all_reduce": ("tree", "ring", "nvls", "nvls_tree"),
        "all_gather": ("ring", "nvls", "pat"),
        "reduce_scatter": ("ring", "nvls", "pat"),
        "broadcast": ("ring",),
        "reduce": ("ring",),
    }
)
#: Catalog architecture -> NCCL's compute-capability index (tuning.cc lines 263-266:
#: ``minCompCap >= 100`` Blackwell, ``>= 90`` Hopper, ``>= 80`` Ampere, else Volta) and the
#: compute capability itself (major x 10) for the tests on ``minCompCap``; the index is the
#: simulator's row of the same tables (:data:`scaleup.sim.params.NCCL_ARCH_ROW`).
_COMPCAP: Final = {
    "pascal": 60, "volta": 70, "ampere": 80, "ada": 89, "hopper": 90, "blackwell": 100,
    "rubin": 100,
}  # fmt: skip
ARCH_INDEX: Final = MappingProxyType(
    {arch: (P.NCCL_ARCH_ROW[arch], cc) for arch, cc in _COMPCAP.items()}
)

#: ``nvlsEfficiency`` (tuning.cc lines 139-144): Volta, Ampere, Hopper, Blackwell.
NVLS_EFFICIENCY: Final = (0.0, 0.0, 0.85, 0.74)
#: ``llMaxBws`` [index1][index2] (tuning.cc lines 177-183): index1 the GPU (one node) or the CPU
#: (several: 0 Intel, 1 AMD), index2 one, two, more nodes.
LL_MAX_BWS: Final = (
    (39.0, 39.0, 20.4),
    (87.7, 22.5, 19.0),
    (141.0, 45.0, 35.0),
    (2 * 141.0, 2 * 45.0, 2 * 35.0),
)
#: ``perChMaxRingLL128Bws``, ``perChMaxTreeLL128Bws``, ``perChMaxTreeBws`` [arch][nodes]
#: (tuning.cc lines 184-204): the simulator's table, which shares them per graph channel too
#: (:data:`scaleup.sim.params.NCCL_GRAPH_CHANNEL_BUS_GB_PER_S`).
PER_CH_MAX_RING_LL128_BWS: Final = P.NCCL_GRAPH_CHANNEL_BUS_GB_PER_S[("ring", "ll128")]
PER_CH_MAX_TREE_LL128_BWS: Final = P.NCCL_GRAPH_CHANNEL_BUS_GB_PER_S[("tree", "ll128")]
PER_CH_MAX_TREE_BWS: Final = P.NCCL_GRAPH_CHANNEL_BUS_GB_PER_S[("tree", "simple")]
#: ``perChMaxNVLSTreeBws`` [arch][nodes] (tuning.cc lines 205-211).
PER_CH_MAX_NVLS_TREE_BWS: Final = (
    (26.5, 18.5, 10.0),
    (24.0, 23.6, 17.8),
    (0.0, 57.7, 45.5),
    (0.0, 96.0, 80.0),
)
#: ``treeCorrectionFactor`` [protocol][log2(nBytes / 64)] (tuning.cc lines 620-628).
TREE_CORRECTION: Final = MappingProxyType(
    {
        "ll": (1.0, 1.0, 1.0, 1.0, .9, .8, .7, .7, .7, .7, .6, .5,
               .4, .4, .5, .6, .7, .8, .9, 1.0, 1.0, 1.0, 1.0, 1.0),
        "ll128": (1.0, 1.0, 1.0, 1.0, 1.0, .9, .8, .8, .8, .7, .6, .6,
                  .6, .6, .6, .6, .8, .9, .9, .9, .9, 1.0, 1.0, 1.0),
        "simple": (.9, .9, .9, .9, .9, .9, .9, .8, .7, .6, .6, .5,
                   .5, .5, .5, .6, .7, .8, .7, .7, .8, .9, .9, .9),
    }
)  # fmt: skip
#: ``NCCL_MAX_NVLS_ARITY`` (src/include/device.h line 213): NVLS all_gather / reduce_scatter
#: take at most this many local ranks (enqueue.cc line 2005).
MAX_NVLS_ARITY: Final = 32

#: ``baseLatencies`` and ``hwLatencies`` are :data:`scaleup.sim.params.NCCL_BASE_LATENCY_S` and
#: :data:`~scaleup.sim.params.NCCL_HW_LATENCY_S` (tuning.cc lines 149-176), here in us.
_US = 1e6


@dataclass(frozen=True)
class Graph:
    """What ``ncclTopoTuneModel`` reads of one searched graph (``struct ncclTopoGraph``):
    channels, per-channel bandwidth inside a node and across nodes (GB/s), whether the
    intra-node links are NVLink (``typeIntra == LINK_NVL``: NVLINK latencies, else PCI),
    ``latencyInter`` (us: what the network plugin reports for its NICs, 0 for NCCL's own
    InfiniBand / RoCE transport, 75 for EFA; the catalog NIC's ``reported_latency_s``) and
    whether NCCL's tree search fell back to the simple TREE pattern (``maxTreePattern``, x0.85
    on tree bandwidth)."""

    n_channels: int
    bw_intra: float
    bw_inter: float
    nvlink: bool = True
    latency_inter_us: float = 0.0
    tree_pattern: bool = False


@dataclass(frozen=True)
class ModelInputs:
    """A communicator as NCCL's model sees it: ranks, nodes, architecture (a key of
    :data:`ARCH_INDEX`), host CPU vendor (``intel``, ``amd`` or ``other``, for the network
    overhead and the multi-node LL ceiling), the graphs by algorithm (``ring``, ``tree``,
    ``nvls``, ``nvls_tree``; an absent one is not offered) and ``comm_channels``, the
    communicator's ``nChannels`` (the ring plateau of ``ncclTopoGetAlgoTime``). ``rccl``: the
    node model RCCL matched, for RCCL's model (``arch`` is then a catalog AMD architecture,
    a key of :data:`scaleup.tune.rccl_tables.GFX`); None for NCCL's."""

    nranks: int
    nnodes: int
    arch: str
    graphs: Mapping[str, Graph] = field(default_factory=dict)
    comm_channels: int = 1
    cpu: str = "other"
    rccl: R.RcclNode | None = None
    #: ``comm->nvlsChannels`` where the group sets it (0: the architecture's table row)
    nvls_channels: int = 0

    def __post_init__(self) -> None:
        if self.nranks < 1 or self.nnodes < 1 or self.nnodes > self.nranks:
            raise UsageError(
                f"need 1 <= nodes <= ranks, got {self.nnodes} nodes and {self.nranks} ranks",
                source="nccl_model",
            )
        if self.arch not in (ARCH_INDEX if self.rccl is None else R.GFX):
            raise UsageError(
                f"the library's model has no constants for architecture {self.arch!r}; known: "
                + ", ".join(ARCH_INDEX if self.rccl is None else R.GFX),
                source="nccl_model",
            )
        if self.cpu not in P.NCCL_NET_OVERHEAD_CPU_S:
            raise UsageError(f"unknown CPU vendor {self.cpu!r}", source="nccl_model")
        for algo, g in self.graphs.items():
            if algo not in ALGO_ORDER or g.n_channels < 0 or g.bw_intra < 0 or g.bw_inter < 0:
                raise UsageError(f"bad graph for {algo!r}: {g}", source="nccl_model")

    @property
    def arch_index(self) -> int:
        """NCCL's compute-capability index (0 for RCCL, whose branch reads no such table)."""
        return ARCH_INDEX[self.arch][0] if self.rccl is None else 0

    @property
    def compcap(self) -> int:
        return ARCH_INDEX[self.arch][1] if self.rccl is None else 0

    @property
    def gfx(self) -> str:
        """RCCL's gfx name of the architecture ("" for NCCL)."""
        return R.GFX[self.arch] if self.rccl is not None else ""


@dataclass(frozen=True)
class ModelEntry:
    """One cell of NCCL's tables: bandwidth (algorithm bandwidth, GB/s) and latency (us)."""

    bandwidth: float
    latency_us: float


def _nsteps(collective: str, nranks: int) -> int:
    """tuning.cc lines 289-291."""
    if collective == "all_reduce":
        return 2 * (nranks - 1)
    if collective in ("all_gather", "reduce_scatter"):
        return nranks - 1
    return nranks


def _log2i(n: int) -> int:
    """NCCL's ``log2i``: floor(log2(n)) for n >= 1, -1 for 0."""
    return n.bit_length() - 1


def model_entry(m: ModelInputs, collective: str, algo: str, proto: str) -> ModelEntry | None:
    """``ncclTopoTuneModel``'s bandwidth and latency of one (collective, algorithm, protocol)
    (tuning.cc lines 284-436), or None where it leaves the cell at 0 (not modelled, no graph,
    fewer than two NVLS channels, NVLS across nodes without CollNet). RCCL: its ``bwRatio``
    instead of NCCL's refinements, no Tree Simple on one gfx94 node (rccl tuning.cc line 365)."""
    if algo not in COLLECTIVE_ALGOS.get(collective, ()) or proto not in PROTO_ORDER:
        return None
    g = m.graphs.get(algo)
    if g is None or g.n_channels < 1 or m.nranks <= 1:
        return None
    if algo in ("nvls", "nvls_tree") and proto != "simple":  # line 301
        return None
    if algo == "pat" and (proto != "simple" or m.nnodes != m.nranks):  # lines 302-304, 216-222
        return None
    if (m.rccl is not None and (algo, proto) == ("tree", "simple") and m.nnodes == 1
            and m.gfx.startswith("gfx94")):  # fmt: skip
        return None
    ai, n = m.arch_index, m.nranks
    index2 = m.nnodes - 1 if m.nnodes <= 2 else 2  # line 267
    index1 = ai if m.nnodes == 1 else (1 if m.cpu == "amd" else 0)  # lines 269-272
    ppn = n / m.nnodes
    nsteps = _nsteps(collective, n)
    bw = g.bw_intra if m.nnodes <= 2 else g.bw_inter  # line 306 (no CollNet)
    if algo in ("nvls", "nvls_tree"):  # lines 307-325
        if g.n_channels < 2:
            return None
        intra = g.bw_intra * NVLS_EFFICIENCY[ai] * (g.n_channels - 1) / g.n_channels
        intra *= 2.0 if collective == "all_reduce" else (ppn - 1) / ppn
        inter = g.bw_inter * (2 if m.nnodes <= 2 and algo == "nvls_tree" else 1)
        cap = PER_CH_MAX_NVLS_TREE_BWS[ai][index2] if algo == "nvls_tree" else math.inf
        bw = min(intra, inter, cap)
    bus = g.n_channels * bw
    if m.rccl is not None:
        bus = R.bus_bandwidth(m.rccl, m.gfx, collective, algo, proto, m.nnodes, bus)
    else:
        bus = _refined(m, g, collective, algo, proto, bus, index1, index2)
    # NVLS all_gather / reduce_scatter across nodes need CollNet (lines 351-374)
    if algo == "nvls" and collective in ("all_gather", "reduce_scatter") and m.nnodes > 1:
        return None
    # bus -> algorithm bandwidth (lines 376-382)
    if not (algo != "ring" and collective in ("all_gather", "reduce_scatter")):
        bus *= n / nsteps if algo in ("ring", "nvls", "nvls_tree") else 0.5
    if bus <= 0:
        return None
    return ModelEntry(bus, _latency_us(m, g, collective, algo, proto, nsteps, ppn))


def _refined(
    m: ModelInputs, g: Graph, collective: str, algo: str, proto: str, bus: float,
    index1: int, index2: int,
) -> float:  # fmt: skip
    """NCCL's "various model refinements" of ``busBw`` (tuning.cc lines 326-337)."""
    ai = m.arch_index
    if algo == "ring" and proto == "ll":
        bus = min(LL_MAX_BWS[index1][index2], bus * 0.5)
    if algo == "ring" and proto == "ll128":
        bus = min(bus * 0.92, g.n_channels * PER_CH_MAX_RING_LL128_BWS[ai][index2])
    if algo == "tree" and collective == "all_reduce":
        bus = min(bus * 0.92, g.n_channels * PER_CH_MAX_TREE_BWS[ai][index2])
    if algo == "tree" and proto == "ll":
        bus = min(bus / 3.8, LL_MAX_BWS[index1][index2])
    if algo == "tree" and proto == "ll128":
        factor = 7.0 / 9.0 if m.nnodes == 1 else 120.0 / 128.0
        bus = min(bus * factor, g.n_channels * PER_CH_MAX_TREE_LL128_BWS[ai][index2])
    if algo == "tree" and g.tree_pattern:
        bus *= 0.85
    if algo == "pat":
        bus *= 0.75
    return bus


def _latency_us(
    m: ModelInputs, g: Graph, collective: str, algo: str, proto: str, nsteps: int, ppn: float
) -> float:
    """``comm->latencies`` (tuning.cc lines 384-436; RCCL: its ``baseLat`` and the ``hwLat`` of
    its tuning set, rccl tuning.cc lines 429-466, with no Tree NET row at one rank per node and
    2 x nNodes inter-node steps for a multi-node Ring all_reduce, line 354)."""
    rccl = m.rccl
    base = (P.NCCL_BASE_LATENCY_S if rccl is None else P.RCCL_BASE_LATENCY_S)[algo][proto] * _US
    hw = P.NCCL_HW_LATENCY_S if rccl is None else P.RCCL_HW_LATENCY_S[rccl.tuning]
    intra = hw["nvlink" if g.nvlink else "pci"][algo][proto] * _US
    inter = (
        hw["net"]["tree"][proto] if ppn == 1 and rccl is None else hw["net"][algo][proto]
    ) * _US  # lines 386-388
    inter += g.latency_inter_us
    if proto == "simple":  # the flush, lines 390-391
        inter += g.latency_inter_us
    nnodes, nranks = m.nnodes, m.nranks
    if algo == "ring":
        step = (hw["net"] if nnodes > 1 else hw["nvlink" if g.nvlink else "pci"])[algo][proto]
        if collective in ("reduce", "broadcast"):  # lines 395-402 (sameChannels: one step)
            return base + step * _US
        overhead = 0.0
        if nnodes > 1:  # lines 404-412
            overhead = P.NCCL_NET_OVERHEAD_CPU_S[m.cpu] * _US * (3 if proto == "simple" else 1)
        intra = max(intra, overhead)
        if nnodes == 1:
            inter_steps = 0
        elif collective == "all_reduce":
            inter_steps = 2 * (nnodes - (1 if rccl is None else 0))
        else:
            inter_steps = nnodes - 1
        return base + (nsteps - inter_steps) * intra + inter_steps * inter
    if algo == "tree":  # lines 414-417
        if collective != "all_reduce":
            return base
        return base + 2 * ((nranks // nnodes - 1) * intra + _log2i(nnodes) * inter)
    if algo == "nvls":  # lines 424-426: replaces the base latency
        return intra + (inter if nnodes > 1 else 0.0)
    if algo == "nvls_tree":  # lines 427-428
        return base + intra + 2 * _log2i(nnodes) * inter
    # pat, lines 429-434
    return base + _log2i(nnodes) * (inter / 3.5) + nranks * 2.8


def algo_time_us(m: ModelInputs, collective: str, algo: str, proto: str, nbytes: int) -> float:
    """``ncclTopoGetAlgoTime`` (tuning.cc lines 630-655) with one operation in flight: latency
    plus ``nBytes / bandwidth``, with the tree correction by size and the multi-node ring
    plateau; ``inf`` where NCCL's table has no bandwidth (the pair is never picked).
    ``nbytes`` is NCCL's ``nBytes``: the larger of the send and receive buffers."""
    if nbytes < 0:
        raise UsageError(f"nBytes must be >= 0, got {nbytes}", source="nccl_model")
    entry = model_entry(m, collective, algo, proto)
    if entry is None:
        return math.inf
    bw, lat = entry.bandwidth, entry.latency_us
    if m.rccl is not None:  # rccl tuning.cc lines 648-658: no plateau, no channel scaling
        bw *= R.correction(m.rccl, algo, proto, m.nnodes, nbytes)
        return lat + nbytes / (1000.0 * bw) if bw > 0 else math.inf
    log_size = _log2i(nbytes >> 6)
    if algo == "tree" and collective == "all_reduce" and 0 <= log_size < 23:
        bw *= TREE_CORRECTION[proto][log_size]
    if (algo == "nvls_tree" and collective == "all_reduce" and 0 <= log_size < 24
            and m.compcap >= 100):  # fmt: skip  # x86 hosts assumed (line 643)
        bw *= TREE_CORRECTION[proto][log_size]
    if (algo == "ring" and proto == "simple" and m.nnodes > 1 and collective == "all_reduce"
            and nbytes // (max(1, m.comm_channels) * m.nranks) >= 64):  # fmt: skip
        lat *= 1.9 if m.compcap < 80 else 1.4  # "plateau effect of ring", lines 647-650
    return lat + nbytes / (1000.0 * bw)


def cost_table(
    m: ModelInputs, collective: str, nbytes: int, pairs: Iterable[tuple[str, str]] | None = None
) -> dict[tuple[str, str], float]:
    """``updateCollCostTable``: the predicted time (us) of every (algorithm, protocol) in
    ``pairs`` (default: every pair NCCL models for the collective) that NCCL's table fills."""
    if pairs is None:
        pairs = [(a, p) for a in COLLECTIVE_ALGOS.get(collective, ()) for p in PROTO_ORDER]
    out = {}
    for algo, proto in pairs:
        t = algo_time_us(m, collective, algo, proto, nbytes)
        if math.isfinite(t):
            out[(algo, proto)] = t
    return out


def nccl_pick(
    m: ModelInputs, collective: str, nbytes: int, pairs: Iterable[tuple[str, str]] | None = None
) -> tuple[str, str] | None:
    """``topoGetAlgoInfo``'s choice among ``pairs``: the least predicted time, the first in
    NCCL's (algorithm, protocol) order on a tie (a strict ``<``, enqueue.cc lines 2036-2045);
    None when none is modelled."""
    table = cost_table(m, collective, nbytes, pairs)
    if not table:
        return None
    order = {(a, p): (ALGO_ORDER.index(a), PROTO_ORDER.index(p)) for a, p in table}
    return min(table, key=lambda ap: (table[ap], order[ap]))
