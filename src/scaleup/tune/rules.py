"""What NCCL would consider: its enable rules, the candidates they leave, and vendor constants.

NCCL picks the (algorithm, protocol) of least *modelled* time among the enabled ones
(``enqueue.cc`` calling ``ncclTopoGetAlgoTime``) and the channel count from its graph search.
The enable rules applied here (prior-art §4.3):

- ``nvls`` only where every rank hangs off switches with in-switch reduction (NVLink SHARP), all
  inside one switch domain (one server, or one NVL72 rack), and only with the ``simple`` protocol
  (NVLS/NVLSTree are Simple-only in NCCL);
- ``ll128`` only on NVLink-class paths (NCCL enables it up to NVB intra-node paths, never over
  PCIe-only or host-staged paths);
- ``hierarchical`` only when the ranks span more than one server;
- ``ring``, ``tree``, ``direct``, ``recursive`` and the other registered algorithms wherever the
  algorithm library supports the collective and the world size;
- channel counts from :func:`scaleup.tune.channels.channel_counts` (the channel search's count,
  its double and the powers of two below it).

The topology facts come from :mod:`scaleup.topology.analysis`; which candidate wins is the
search's (:mod:`scaleup.tune.search`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from scaleup.collectives.algorithms import algorithms_for
from scaleup.errors import UsageError
from scaleup.topology import analysis
from scaleup.topology.model import Topology
from scaleup.tune.channels import channel_counts

__all__ = [
    "CHUNK_BYTES",
    "FAMILIES",
    "MAX_PIPELINE_CHUNKS",
    "NCCL_ALGORITHMS",
    "Candidate",
    "candidates",
    "check_family",
    "chunks_for",
    "enabled_algorithms",
    "enabled_protocols",
]

#: Algorithms NCCL has (ring, tree, nvls; CollNet/PAT if the library grows them). ``hierarchical``
#: stands for NCCL's multi-node compositions (NVLSTree, tree across nodes, ring within).
NCCL_ALGORITHMS = frozenset({"ring", "tree", "nvls", "collnet", "pat", "hierarchical"})
#: Algorithm families the tuner picks from: NCCL's (what nccl-tests prints) or all of ours.
FAMILIES = ("nccl", "all")
#: Bytes one pipeline step moves per channel, per protocol (NCCL's per-step buffer slot:
#: Simple 4 MiB buffer / NCCL_STEPS 8 = 512 KiB; LL 256 KiB of data / 8 = 32 KiB; LL128 about
#: 600 KB / 8 ~ 64 KiB of data; ``src/include/device.h``, ``DEFAULT_*_BUFFSIZE``).
CHUNK_BYTES = {"simple": 512 * 1024, "ll": 32 * 1024, "ll128": 64 * 1024}
#: Pipelined algorithms (tree, chains) are cut into at most this many chunks per channel: enough to
#: amortise the pipeline fill (within 1/16 of the streaming time), few enough to keep schedules
#: small at 8 GB.
MAX_PIPELINE_CHUNKS = 16

#: (algorithm, collective) pairs whose time benefits from cutting the message into a pipeline.
_PIPELINED = {
    ("tree", "all_reduce"),
    ("tree", "broadcast"),
    ("tree", "reduce"),
    ("ring", "broadcast"),
    ("ring", "reduce"),
    ("hierarchical", "all_reduce"),  # chunk c crosses the nodes while chunk c+1 is reduced inside
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


def chunks_for(algorithm: str, collective: str, nbytes: int, channels: int, protocol: str) -> int:
    """Pipeline depth: one chunk per protocol step slot of each channel's share, for pipelined
    algorithms (tree, chain broadcast/reduce), capped at :data:`MAX_PIPELINE_CHUNKS`; else 1.

    >>> chunks_for("tree", "all_reduce", 1 << 30, 8, "simple")
    16
    >>> chunks_for("ring", "all_reduce", 1 << 30, 8, "simple")
    1
    """
    if (algorithm, collective) not in _PIPELINED:
        return 1
    per_channel = nbytes / max(channels, 1)
    want = max(1, math.ceil(per_channel / CHUNK_BYTES[protocol]))
    return int(min(MAX_PIPELINE_CHUNKS, 1 << (want - 1).bit_length()))  # a power of two


def enabled_algorithms(
    topology: Topology, collective: str, ranks: Sequence[int] | None = None, family: str = "nccl"
) -> list[str]:
    """Algorithms the library has for ``collective`` that NCCL's rules enable on this fabric.

    ``family="nccl"`` (default) keeps the algorithms NCCL has (:data:`NCCL_ALGORITHMS`), so the
    tuner predicts what nccl-tests prints; ``"all"`` adds ours (direct, recursive), which NCCL
    does not implement for these collectives.
    """
    check_family(family)
    multi_node = len(set(analysis.rank_nodes(topology, ranks))) > 1
    out = []
    for name in algorithms_for(collective):
        if name == "nvls" and not analysis.nvls_capable(topology, ranks):
            continue
        if name == "hierarchical" and not multi_node:
            continue
        out.append(name)
    if family == "all":
        return out
    # our hierarchical stands for NCCL's multi-node all_reduce (tree / NVLSTree compose an
    # intra-node and an inter-node phase); NCCL's all_gather / reduce_scatter are rings
    nccl = [
        a
        for a in out
        if a in NCCL_ALGORITHMS and not (a == "hierarchical" and collective != "all_reduce")
    ]
    return nccl or out  # all_to_all / send_recv: NCCL's p2p pairwise exchange is our direct


def enabled_protocols(
    topology: Topology, algorithm: str, ranks: Sequence[int] | None = None
) -> list[str]:
    """Protocols enabled for ``algorithm`` (NCCL's order: LL, LL128, Simple): NVLS is
    Simple-only; LL128 only on NVLink paths."""
    if algorithm == "nvls":
        return ["simple"]
    protos = ["ll", "simple"]
    if analysis.nvlink_class(topology, ranks):
        protos.insert(1, "ll128")
    return protos


def candidates(
    topology: Topology,
    collective: str,
    *,
    ranks: Sequence[int] | None = None,
    algo: str | None = None,
    proto: str | None = None,
    channels: int | None = None,
    family: str = "nccl",
    counts: Sequence[int] | None = None,
) -> list[Candidate]:
    """Every enabled candidate, narrowed by the ``algo``/``proto``/``channels`` overrides.

    An override bypasses the enable rule it names (``algorithm="nvls"`` on a fabric without
    NVLS is still tried, and fails if the algorithm cannot be built), as ``NCCL_ALGO`` does.
    The overrides are taken as given: :class:`~scaleup.tune.request.BenchRequest` validates them.
    ``counts``: the channel counts to try (a session passes its searched plan's), else
    :func:`~scaleup.tune.channels.channel_counts` searched here.
    """
    algos = [algo] if algo is not None else enabled_algorithms(topology, collective, ranks, family)
    if channels is not None:
        counts = (channels,)
    elif counts is None:
        counts = channel_counts(topology, ranks)
    out: list[Candidate] = []
    for a in algos:
        protos = [proto] if proto is not None else enabled_protocols(topology, a, ranks)
        out.extend(Candidate(a, p, c) for p in protos for c in counts)
    return out
