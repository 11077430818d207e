"""RCCL's MSCCL algorithms: chosen by message size before RCCL's own tuner, where they apply.

RCCL enables MSCCL by default (``RCCL_MSCCL_ENABLE``, ``src/misc/msccl/msccl_lifecycle.cc``
line 29) and runs it on the node models that set ``mscclEnabled=1``: for MI300X, the 8-GPU
fully connected model without NICs (``src/graph/rome_models.cc`` ``rome_model_79``, line 559;
a single-node communicator trims its NICs first, so one whole 8 x MI300X node matches it, while
a subset of its GPUs or a multi-node communicator matches no MSCCL model). Before the tuner,
``mscclInternalSchedulerSelectAlgo`` (msccl_lifecycle.cc lines 328-342) takes the first loaded
algorithm whose rank count and collective match, whose byte range holds the message and whose
``nchunksperloop`` divides the element count. RCCL ships all_reduce algorithms for 8 ranks only
(``tools/msccl-algorithms/allreduce-allpairs-8n-*.xml``), the all-pairs two-shot of
:mod:`~scaleup.collectives.algorithms.allpairs`; their ranges (out-of-place files, the variant
nccl-tests times first) are :data:`ALLREDUCE_PAIRS`. A message outside them, or with a count the
chunking does not divide (8 bytes of float32: 2 elements), runs RCCL's ring or tree as before.

The MSCCL kernel is an RCCL kernel: the simulator charges it RCCL's base latency and step
latencies like every RCCL collective (no MSCCL-specific figure is published).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from scaleup import hardware
from scaleup.sim.protocols import library_for
from scaleup.topology import analysis
from scaleup.topology.model import Topology
from scaleup.tune.rules import Candidate

__all__ = [
    "ALLREDUCE_PAIRS",
    "MSCCL_ARCHS",
    "MSCCL_RANKS",
    "MscclRange",
    "msccl_candidate",
    "msccl_rule",
]


@dataclass(frozen=True)
class MscclRange:
    """One algorithm file: its protocol, channels and chunking, and the bytes it takes."""

    protocol: str
    channels: int
    chunks_per_loop: int
    min_bytes: int
    max_bytes: int
    source: str


#: RCCL's shipped all_reduce algorithms (out-of-place: ``inplace="0" outofplace="1"``).
ALLREDUCE_PAIRS: tuple[MscclRange, ...] = (
    MscclRange("ll", 4, 256, 0, 65536, "allreduce-allpairs-8n-ll-32tb-op.xml"),
    MscclRange("ll", 8, 512, 65537, 524287, "allreduce-allpairs-8n-ll-64tb-op.xml"),
    MscclRange("simple", 8, 512, 524288, 16777216, "allreduce-allpairs-8n-simple-op.xml"),
)
#: The rank count of those files (``ngpus="8"``), and the architectures whose node model sets
#: ``mscclEnabled`` with an 8-GPU node (CDNA3: MI300X, rome_model_79).
MSCCL_RANKS = 8
MSCCL_ARCHS = frozenset({"cdna3"})


def msccl_rule(
    topology: Topology, collective: str, ranks: Sequence[int] | None = None
) -> tuple[MscclRange, ...]:
    """The MSCCL ranges RCCL would use for ``collective`` on these ranks (empty if none)."""
    if collective != "all_reduce" or library_for(topology, ranks) != "rccl":
        return ()
    accs = topology.accelerators
    index = list(range(len(accs))) if ranks is None else [int(r) for r in ranks]
    if len(index) != MSCCL_RANKS or len(set(analysis.rank_nodes(topology, ranks))) != 1:
        return ()
    node = accs[index[0]].node
    if sum(1 for a in accs if a.node == node) != MSCCL_RANKS:  # the whole node, not a subset
        return ()
    if str(hardware.accelerator(accs[index[0]].type).arch) not in MSCCL_ARCHS:
        return ()
    return ALLREDUCE_PAIRS


def msccl_candidate(ranges: Sequence[MscclRange], nbytes: int, count: int) -> Candidate | None:
    """The all-pairs candidate of the first range that takes ``count`` elements of ``nbytes``
    bytes (msccl_lifecycle.cc: ``count % nchunksperloop == 0`` and the byte range), else None.

    >>> msccl_candidate(ALLREDUCE_PAIRS, 1024, 256)
    Candidate(algorithm='allpairs', protocol='ll', channels=4)
    >>> msccl_candidate(ALLREDUCE_PAIRS, 8, 2) is None  # 2 elements: not a multiple of 256
    True
    """
    for r in ranges:
        if count > 0 and count % r.chunks_per_loop == 0 and r.min_bytes <= nbytes <= r.max_bytes:
            return Candidate("allpairs", r.protocol, r.channels)
    return None
