"""How many of its channels NCCL (and RCCL) give one collective of a given size.

After choosing the algorithm and protocol, ``topoGetAlgoInfo`` trims the channel count of ring
and tree collectives until every channel has enough work for its threads (NVIDIA/nccl
``src/enqueue.cc`` lines 2091-2097; ROCm/rccl ``src/enqueue.cc`` lines 1677-1685)::

    nc = comm->nChannels
    while (nBytes < nc * nt * threadThreshold && nc >= 2) nc--;

``nBytes`` is the larger of the send and receive buffers (``ncclFuncMaxSendRecvCount``: the
whole buffer for all_reduce, the gathered buffer for all_gather), ``nt`` the protocol's thread
count and ``threadThreshold`` NCCL's per-thread byte threshold: 8 for LL and LL128, 64 for Simple
(``src/include/comm.h`` lines 49-51), the Ring LL one multiplied by the rank count
(``src/graph/tuning.cc`` line 593). Threads (``ncclTopoTuneModel``, tuning.cc lines 244-256, and
``src/include/device.h``): NCCL 512 for LL and Simple (256 for Ring Simple where the ring's
intra-node bandwidth times its channels is at most PCIe's), 640 for LL128; RCCL 256 for every
protocol (``NCCL_MAX_NTHREADS`` and ``NCCL_LL128_MAX_NTHREADS``, rccl ``device.h`` lines 68-87).
NVLS and NVLS-Tree run on ``comm->nvlsChannels`` at every size (enqueue.cc lines 2084-2090),
set by ``ncclNvlsTuning`` (``src/transport/nvls.cc`` lines 155-157 and 202-238): 16 before
Blackwell (``NVLS_NCHANNELS_SM90``), 24 on one Blackwell NVLink domain
(``NVLS_NCHANNELS_SM100_NVL``), across Blackwell nodes ``NVLS_NCHANNELS_SM100`` = 32 as
``ncclNvlsTreeSm100Tuning`` sets it by node count, GPUs per node and NIC speed (24 on four
NVL72 racks of 400G NICs: :func:`sm100_multi_node_channels`). In-switch reduction on
a switch NCCL does not drive (Tomahawk Ultra, UALink) takes the pre-Blackwell default, 16: no
library figure exists for it. CollNet is left alone, and so are the algorithms NCCL does not
have. A flag that pins the channel count (``--channels``) is taken as
the count to run; ``NCCL_MIN/MAX_NCHANNELS`` set ``comm->nChannels`` and are trimmed like it.

So a 64 KiB all_reduce on 8 GPUs runs its LL ring on 2 channels (32 KiB per channel), and a
ring LL on the 72 GPUs of an NVL72 rack on 1 channel up to 288 KiB.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Final

from scaleup import hardware
from scaleup.sim import params as P
from scaleup.sim.protocols import library_for
from scaleup.topology import analysis
from scaleup.topology.elements import NodeKind
from scaleup.topology.model import Topology
from scaleup.tune.rules import Candidate

__all__ = [
    "NVLS_CHANNELS",
    "NVLS_CHUNK_BYTES",
    "THREAD_THRESHOLD",
    "ChannelTrim",
    "nvls_channel_count",
    "nvls_tree_chunk_bytes",
    "sm100_multi_node_channels",
    "sm100_tree_chunk_bytes",
    "sm100_tree_tuning",
    "tree_ll128_chunk_bytes",
    "tree_ll128_chunk_for",
    "tree_ll128_shape",
]

#: NCCL_{LL,LL128,SIMPLE}_THREAD_THRESHOLD (comm.h lines 49-51; the same in RCCL's comm.h 40-42).
THREAD_THRESHOLD: Final = MappingProxyType({"ll": 8, "ll128": 8, "simple": 64})
#: Threads per channel: NCCL's maxThreads (tuning.cc lines 244-256, device.h lines 93-114).
_NCCL_THREADS: Final = MappingProxyType({"ll": 512, "ll128": 640, "simple": 512})
#: Ring Simple on PCIe-class rings (``simpleDefaultThreads``, tuning.cc line 245).
_NCCL_PCI_RING_SIMPLE_THREADS = 256
#: RCCL: 256 threads for every protocol (rccl device.h lines 68-87, tuning.cc lines 305-313).
_RCCL_THREADS: Final = MappingProxyType({"ll": 256, "ll128": 256, "simple": 256})
#: The algorithms trimmed, and which of NCCL's rows each uses (our ``hierarchical`` stands for
#: NCCL's tree compositions across nodes).
_ROW: Final = MappingProxyType({"ring": "ring", "tree": "tree", "hierarchical": "tree"})
#: ``ncclNvlsTuning``'s channel counts by architecture row (nvls.cc lines 155-157): SM90 and
#: every part without an NCCL figure 16; Blackwell (and Rubin, an ESTIMATE until NCCL tunes it)
#: 24 in one NVLink domain, 32 across nodes.
NVLS_CHANNELS: Final = MappingProxyType(
    {"default": 16, "blackwell": 24, "blackwell-multi-node": 32}
)


@dataclass(frozen=True)
class ChannelTrim:
    """The trimming rule of one group of ranks (its library, size and link class)."""

    nranks: int
    threads: Mapping[str, int]
    ring_simple_threads: int
    #: ``comm->nvlsChannels`` (see module)
    nvls_channels: int = NVLS_CHANNELS["default"]

    @classmethod
    def of(cls, topology: Topology, ranks: Sequence[int] | None = None) -> ChannelTrim:
        """The rule for ``ranks`` of ``topology`` (default: every accelerator)."""
        n = len(topology.accelerators) if ranks is None else len(ranks)
        nvls = nvls_channel_count(topology, ranks)
        if library_for(topology, ranks) == "rccl":
            return cls(n, _RCCL_THREADS, _RCCL_THREADS["simple"], nvls)
        nvlink = analysis.nvlink_class(topology, ranks)
        ring_simple = _NCCL_THREADS["simple"] if nvlink else _NCCL_PCI_RING_SIMPLE_THREADS
        return cls(n, _NCCL_THREADS, ring_simple, nvls)

    def channels(self, algorithm: str, protocol: str, nbytes: int, channels: int) -> int:
        """The channels NCCL runs ``algorithm``/``protocol`` on for ``nbytes`` of ``channels``.

        >>> rule = ChannelTrim(8, _NCCL_THREADS, 512)
        >>> rule.channels("ring", "ll", 65536, 16), rule.channels("ring", "simple", 1 << 30, 16)
        (2, 16)
        >>> rule.channels("nvls", "simple", 8, 4)
        16
        """
        if algorithm in ("nvls", "nvls_tree"):
            return self.nvls_channels
        row = _ROW.get(algorithm)
        if row is None:
            return channels
        threads = self.threads[protocol]
        if row == "ring" and protocol == "simple":
            threads = self.ring_simple_threads
        threshold = THREAD_THRESHOLD[protocol] * (
            self.nranks if (row, protocol) == ("ring", "ll") else 1
        )
        per_channel = threads * threshold
        return max(1, min(channels, nbytes // per_channel))

    def trim(self, cand: Candidate, nbytes: int) -> Candidate:
        """``cand`` with the channels NCCL would give it at ``nbytes``."""
        nc = self.channels(cand.algorithm, cand.protocol, nbytes, cand.channels)
        return cand if nc == cand.channels else Candidate(cand.algorithm, cand.protocol, nc)


def nvls_channel_count(topology: Topology, ranks: Sequence[int] | None = None) -> int:
    """``comm->nvlsChannels`` of the group (see module): by the accelerators' architecture row,
    whether the group spans several nodes, and across Blackwell nodes
    :func:`sm100_multi_node_channels`.

    >>> from scaleup.topology import resolve_topology
    >>> [nvls_channel_count(resolve_topology(p)) for p in
    ...  ("dgx-h100", "hgx-b200", "2xgb200-nvl72", "4xgb200-nvl72", "4xhgx-b300:nic=ib-xdr")]
    [16, 24, 32, 24, 24]
    """
    rows, nodes = _rows_and_nodes(topology, ranks)
    if rows != {"blackwell"}:
        return NVLS_CHANNELS["default"]
    if len(nodes) == 1:
        return NVLS_CHANNELS["blackwell"]
    return sm100_multi_node_channels(len(nodes), min(nodes.values()), _nic_gb_per_s(topology))


def sm100_multi_node_channels(nnodes: int, ppn: int, nic_gb_per_s: float) -> int:
    """``ncclNvlsTreeSm100Tuning``'s channel count across Blackwell nodes (NVIDIA/nccl
    ``src/transport/nvls.cc`` lines 164-199; ``nicBw`` is ``comm->minNetBw``, a NIC's speed in
    GB/s): 32 on two nodes of NICs of at least 48 GB/s; with 96 GB/s NICs (ConnectX-8) 24 up to
    8 GPUs per node and 32 above; with 48 GB/s NICs (400G) 24; slower NICs keep
    ``NVLS_NCHANNELS_SM100`` = 32.

    >>> [sm100_multi_node_channels(n, p, b) for n, p, b in
    ...  ((2, 72, 50.0), (4, 72, 50.0), (4, 8, 100.0), (4, 72, 100.0), (4, 8, 25.0))]
    [32, 24, 24, 32, 32]
    """
    if nnodes == 2 and nic_gb_per_s >= 48.0:
        return 32
    if nic_gb_per_s >= 96.0:
        return 24 if ppn <= 8 else 32
    if nic_gb_per_s >= 48.0:
        return 24
    return NVLS_CHANNELS["blackwell-multi-node"]


#: ``NCCL_NVLS_CHUNKSIZE``'s default (nvls.cc line 160): an NVLS step's bytes per head.
NVLS_CHUNK_BYTES: Final = 128 * 1024


def sm100_tree_tuning(nnodes: int, ppn: int, nic_gb_per_s: float) -> tuple[int, int]:
    """``(nvlsChunkSize, nvlsTreeMaxChunkSize)`` as ``ncclNvlsTreeSm100Tuning`` sets them
    across Blackwell nodes (NCCL 2.30.7 nvls.cc lines 164-199), with every NIC next to its GPU
    (NCCL's ``PATH_PIX``, at most ``PATH_PXB``: the presets attach a NIC to its GPU's PCIe
    port); a tree maximum of 0 is one the tuning leaves unset.

    >>> [sm100_tree_tuning(n, p, b) for n, p, b in ((2, 8, 50.0), (4, 8, 100.0), (4, 8, 25.0))]
    [(131072, 65536), (262144, 262144), (131072, 0)]
    """
    chunk, tree_max = NVLS_CHUNK_BYTES, 0
    if nnodes == 2 and nic_gb_per_s >= 48.0:
        tree_max = 128 * 1024
        if ppn <= 4:
            chunk = tree_max = 256 * 1024
        elif ppn >= 16 or (ppn <= 8 and nic_gb_per_s < 96.0):
            tree_max = 64 * 1024
    elif nic_gb_per_s >= 96.0:
        if ppn <= 8:
            chunk = tree_max = 256 * 1024
        else:
            tree_max = 128 * 1024 if ppn < 32 else 64 * 1024
    elif nic_gb_per_s >= 48.0:
        tree_max = 64 * 1024
    return chunk, tree_max


def sm100_tree_chunk_bytes(nnodes: int, ppn: int, nic_gb_per_s: float) -> int:
    """``min(nvlsChunkSize, nvlsTreeMaxChunkSize)`` across Blackwell nodes with no variable set
    (:func:`sm100_tree_tuning`; ``ncclNvlsTuning``'s fallback where the tuning leaves the tree
    maximum unset, nvls.cc lines 225-229); calcCollChunking takes the smaller (enqueue.cc line
    2281).

    >>> [sm100_tree_chunk_bytes(n, p, b) // 1024 for n, p, b in
    ...  ((2, 4, 50.0), (2, 8, 50.0), (2, 8, 100.0), (4, 8, 100.0), (4, 72, 100.0), (4, 8, 50.0))]
    [256, 64, 128, 256, 64, 64]
    """
    chunk, tree_max = sm100_tree_tuning(nnodes, ppn, nic_gb_per_s)
    if tree_max == 0:
        tree_max = 64 * 1024 if nnodes >= 4 else chunk
    return min(chunk, tree_max)


def nvls_tree_chunk_bytes(
    topology: Topology,
    ranks: Sequence[int] | None = None,
    nbytes: int | None = None,
    concurrent_ops: int = 1,
    *,
    nvls_chunk_bytes: int | None = None,
    tree_max_chunk_bytes: int | None = None,
) -> int:
    """NVLS-Tree's step across the group's nodes: the chunk one head's connection moves at a
    time. ``ncclNvlsTuning`` (NCCL 2.30.7 nvls.cc lines 202-238) takes ``nvlsChunkSize`` from
    ``NCCL_NVLS_CHUNKSIZE`` (``nvls_chunk_bytes``) where set, else from the Blackwell multi-node
    tuning (:func:`sm100_tree_tuning`), else 128 KiB; and ``nvlsTreeMaxChunkSize`` from
    ``NCCL_NVLSTREE_MAX_CHUNKSIZE`` (``tree_max_chunk_bytes``) where set, else from the tuning,
    else 64 KiB from four nodes on and the chunk size below that. calcCollChunking (enqueue.cc
    lines 2276-2286) takes the smaller and, for a message of ``nbytes`` (None: a large one),
    halves it down to 256 / 128 / 64 / 32 KiB while the message holds fewer than 32 / 16 / 4 / 1
    chunks per concurrent op (``concurrent_ops`` = channels x heads).

    >>> from scaleup.topology import resolve_topology
    >>> [nvls_tree_chunk_bytes(resolve_topology(p)) // 1024 for p in
    ...  ("2xdgx-h100", "4xdgx-h100", "2xgb200-nvl72", "2xhgx-b200:nic=ib-ndr")]
    [128, 64, 64, 64]
    >>> [nvls_tree_chunk_bytes(resolve_topology("2xdgx-h100"), None, s << 20, 128) // 1024
    ...  for s in (128, 16, 8, 1)]
    [128, 64, 64, 32]
    >>> nvls_tree_chunk_bytes(resolve_topology("4xdgx-h100"), nvls_chunk_bytes=1 << 19,
    ...                       tree_max_chunk_bytes=1 << 19) // 1024  # aws-ofi-nccl on p5
    512
    """
    rows, nodes = _rows_and_nodes(topology, ranks)
    chunk, tree_max = NVLS_CHUNK_BYTES, 0
    if rows == {"blackwell"} and len(nodes) > 1:
        chunk, tree_max = sm100_tree_tuning(
            len(nodes), min(nodes.values()), _nic_gb_per_s(topology)
        )
    if nvls_chunk_bytes is not None:
        chunk = nvls_chunk_bytes
    if tree_max_chunk_bytes is not None:
        tree_max = tree_max_chunk_bytes
    elif tree_max == 0:
        tree_max = 64 * 1024 if len(nodes) >= 4 else chunk
    chunk = min(chunk, tree_max)
    if nbytes is None:
        return chunk
    for chunks, floor in ((32, 256 * 1024), (16, 128 * 1024), (4, 64 * 1024), (1, 32 * 1024)):
        if nbytes < chunks * concurrent_ops * chunk and chunk > floor:
            chunk = floor
    return chunk


#: Data bytes in one slot of NCCL's LL128 buffer: ``DEFAULT_LL128_BUFFSIZE`` (init.cc line 698:
#: 120 elements x 640 threads x NCCL_STEPS x 8 B = 4,915,200 B) over NCCL_STEPS (8), of which
#: 15 of every 16 words are data (``(stepSize / NCCL_LL128_LINEELEMS) * NCCL_LL128_DATAELEMS``,
#: enqueue.cc line 2028).
LL128_STEP_DATA_BYTES: Final = 4_915_200 // 8 // 16 * 15
#: ``ncclProtoGrainSize(NCCL_PROTO_LL128)`` (device.h line 311: 32 x 8 / 16 x 15 x 8 B).
LL128_GRAIN_BYTES: Final = 32 * 8 // 16 * 15 * 8


def tree_ll128_chunk_bytes(
    topology: Topology, ranks: Sequence[int] | None, nbytes: int, channels: int
) -> int | None:
    """The chunk NCCL's tree LL128 moves per step across nodes, for a message of ``nbytes`` on
    ``channels`` channels; None on one node or under RCCL (the protocol's default step).

    calcCollChunking (NCCL 2.28.7 enqueue.cc lines 2069-2077; the same rule since 2.4) starts
    from one LL128 slot (:data:`LL128_STEP_DATA_BYTES`) and halves it while a channel's share
    holds fewer than ``s x 64 / ppn`` chunks (down to 128 KiB) and then ``s x 16 / ppn`` (down
    to 32 KiB), with ``s = 1 + floor(log2(nodes)) + 0.1 ppn``; line 2093 aligns it to the
    protocol's grain. Across nodes a chunk is what each network step carries (the proxy sends
    whole steps), so it sets the pipeline's fill, where the simulator's default LL128 step
    (:data:`~scaleup.tune.rules.CHUNK_BYTES`) is the finer grain at which GPUs pass LL128
    lines on.

    >>> from scaleup.topology import resolve_topology
    >>> p5 = resolve_topology("8xdgx-h100:nic=efa-400g")
    >>> [tree_ll128_chunk_bytes(p5, None, s << 20, 16) for s in (32, 128, 256, 4096)]
    [71040, 144000, 288000, 576000]
    >>> tree_ll128_chunk_bytes(resolve_topology("dgx-h100"), None, 1 << 30, 16) is None
    True
    """
    shape = tree_ll128_shape(topology, ranks)
    return None if shape is None else tree_ll128_chunk_for(nbytes, channels, *shape)


def tree_ll128_shape(topology: Topology, ranks: Sequence[int] | None) -> tuple[int, float] | None:
    """(nodes, ranks per node) of a group whose tree LL128 runs on NCCL's chunk across nodes
    (:func:`tree_ll128_chunk_bytes`); None on one node or under RCCL. Computed once per group
    by the tuner: it walks every rank."""
    per_node = Counter(analysis.rank_nodes(topology, ranks))
    if len(per_node) < 2 or library_for(topology, ranks) == "rccl":
        return None
    return len(per_node), sum(per_node.values()) / len(per_node)


def tree_ll128_chunk_for(nbytes: int, channels: int, nodes: int, ppn: float) -> int:
    """calcCollChunking's tree LL128 chunk for ``nbytes`` on ``channels`` channels over
    ``nodes`` nodes of ``ppn`` ranks each (:func:`tree_ll128_chunk_bytes`)."""
    steps = 1 + (nodes.bit_length() - 1) + 0.1 * ppn  # log2i: floor(log2(nodes))
    chunk = LL128_STEP_DATA_BYTES
    lanes = max(channels, 1)
    while nbytes // (lanes * chunk) < steps * 64 / ppn and chunk > 131072:
        chunk //= 2
    while nbytes // (lanes * chunk) < steps * 16 / ppn and chunk > 32768:
        chunk //= 2
    return chunk // LL128_GRAIN_BYTES * LL128_GRAIN_BYTES


def _rows_and_nodes(
    topology: Topology, ranks: Sequence[int] | None
) -> tuple[set[str], Counter[int]]:
    """The group's architecture rows (:data:`scaleup.sim.params.ARCH_ALIASES`) and its ranks
    per node."""
    accs = topology.accelerators
    chosen = accs if ranks is None else [accs[int(r)] for r in ranks]
    rows = {P.ARCH_ALIASES.get(str(hardware.accelerator(a.type).arch), "default") for a in chosen}
    return rows, Counter(analysis.rank_nodes(topology, ranks))


def _nic_gb_per_s(topology: Topology) -> float:
    """The slowest NIC port into the scale-out fabric, GB/s (NCCL's ``minNetBw``: a NIC's
    speed; the presets' NICs are alike, so the whole topology's slowest stands for the group's);
    0 without NICs."""
    kind = {d.id: d.kind for d in topology.devices}
    rates = [
        c.bandwidth_bytes_per_s
        for c in topology.channels
        if kind.get(c.src) is NodeKind.NIC and kind.get(c.dst) is NodeKind.SWITCH
        and hardware.link_tech(c.tech).scope == "scale-out"
    ]  # fmt: skip
    return min(rates) / 1e9 if rates else 0.0
