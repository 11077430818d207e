"""The inputs of RCCL's cost model (:mod:`scaleup.tune.nccl_model` with
:mod:`scaleup.tune.rccl_tables`) for a group of ranks on AMD nodes.

RCCL does not search its graphs on the nodes it knows: it matches a node model
(``src/graph/rome_models.cc``, ROCm/rccl @0cbce2a7) and parses its ``ringBase``; ``parseGraph``
(line 1229) then sets every channel's ``bwIntra = bwInter = totalBw / nChannels``, where
``totalBw`` is the most xGMI bandwidth of one GPU (``getTotalBw``, src/graph/search.cc lines
31-39: its links x ``ncclTopoXGMISpeed``, topo.h lines 31-33). So ``nChannels x bw`` is
``totalBw`` (336 GB/s for 7 links of an MI300X), unless the node model sets ``baseBw``. The tree
graph is the ring's (``parseRome4P2H`` falls back to ``ringBase`` for trees, lines 1893-1900).
``comm->nChannels``: the rings, doubled by ``ncclTopoPostset`` and raised to ``nc`` x rings
(src/graph/connect.cc lines 642-707; ``nc`` 4 on one gfx90a node, else 2 on the nodes here,
src/init.cc lines 1471-1502), at most ``MAXCHANNELS`` 128 (rccl src/include/device.h line 65).

Applies where RCCL matches one of :data:`~scaleup.tune.rccl_tables.NODE_MODELS`: every rank on
whole nodes of the model's GPU count and one architecture. A subset of a node's GPUs (RCCL would
then search as NCCL does, with tuning set 0) or an unknown node gives None: the tuner keeps the
fastest simulated candidate there. Not checked: the node model's CPU and NIC counts.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Sequence
from typing import Final

from scaleup import hardware
from scaleup.topology.model import Topology
from scaleup.tune import rccl_tables as R
from scaleup.tune.nccl_model import Graph, ModelInputs

__all__ = ["MAXCHANNELS", "rccl_model_inputs", "xgmi_links"]

#: RCCL's ``MAXCHANNELS`` (src/include/device.h line 65).
MAXCHANNELS: Final = 128


def xgmi_links(topology: Topology, ids: set[str]) -> dict[str, dict[str, int]]:
    """{GPU id: {peer GPU id: xGMI link count}} among ``ids``."""
    out: dict[str, dict[str, int]] = {i: {} for i in ids}
    for ch in topology.channels:
        if ch.src in ids and ch.dst in ids and str(hardware.link_tech(ch.tech).family) == "xgmi":
            out[ch.src][ch.dst] = out[ch.src].get(ch.dst, 0) + ch.count
    return out


def rccl_model_inputs(topology: Topology, ranks: Sequence[int] | None = None) -> ModelInputs | None:
    """RCCL's view of ``ranks`` of ``topology`` (default every accelerator), or None where no
    node model of :data:`~scaleup.tune.rccl_tables.NODE_MODELS` matches (see module).

    >>> from scaleup.topology import resolve_topology
    >>> m = rccl_model_inputs(resolve_topology("mi300x-8"))
    >>> m.graphs["ring"].n_channels, m.graphs["ring"].bw_intra, m.comm_channels, m.rccl.tuning
    (28, 12.0, 56, 5)
    """
    accs = topology.accelerators
    chosen = accs if ranks is None else [accs[int(r)] for r in ranks]
    archs = {str(hardware.accelerator(a.type).arch) for a in chosen}
    vendors = {str(hardware.accelerator(a.type).vendor) for a in chosen}
    if len(archs) != 1 or vendors != {"amd"}:
        return None
    arch = archs.pop()
    in_group = Counter(a.node for a in chosen)
    node = R.NODE_MODELS.get((arch, len(in_group) > 1))
    per_node = Counter(a.node for a in accs)
    if node is None or any(per_node[n] != c or c != node.gpus for n, c in in_group.items()):
        return None
    gfx = R.GFX[arch]
    links = xgmi_links(topology, {a.id for a in chosen})
    total = max(sum(peers.values()) for peers in links.values()) * R.xgmi_width(gfx)
    if total <= 0:
        return None
    # LL128 also needs every GPU pair of the node joined by xGMI (RCCL_TOPO_XGMI_ALL: paths.cc
    # lines 781-793, enqueue.cc line 1598)
    same_node = {a.id: a.node for a in chosen}
    all_xgmi = all(
        b in links[a] for a in links for b in links if a != b and same_node[a] == same_node[b]
    )
    if node.ll128 and not all_xgmi:
        node = dataclasses.replace(node, ll128=False)
    ring = Graph(node.rings, total / node.rings, total / node.rings, nvlink=True)
    nc = 4 if gfx == "gfx90a" and len(in_group) == 1 else 2
    comm = min(MAXCHANNELS, max(2 * node.rings, nc * node.rings))
    return ModelInputs(
        len(chosen), len(in_group), arch, {"ring": ring, "tree": ring}, comm, "amd", node
    )
