"""RCCL's cost-model constants: what RCCL's ``ncclTopoTuneModel`` uses instead of NCCL's tables.

RCCL (ROCm/rccl @0cbce2a7571c907554199fad7e905f16ec0a565c, 2024-10-24) keeps NCCL's model
(:mod:`scaleup.tune.nccl_model`) but, built for AMD (``__HIP_PLATFORM_AMD__``), replaces NCCL's
"model refinements" and size corrections with a per-platform ``tuningModel``
(``src/graph/tuning.cc`` lines 67-261): hardware latencies (held in
:data:`scaleup.sim.params.RCCL_HW_LATENCY_S`), a bandwidth ratio per (algorithm, protocol) for two
nodes or fewer and for more (:data:`BW_RATIO`), and a tree and a ring correction factor per
protocol and log2(nBytes / 64), 27 sizes (:data:`TREE_CORRECTION`, :data:`RING_CORRECTION`). The
platform set, and a few more switches, come from the node model RCCL matches
(``src/graph/rome_models.cc``, ``options``): :class:`RcclNode`, :data:`NODE_MODELS`.

Only the sets the catalog's AMD nodes use are copied (1, 4, 5; see
:data:`scaleup.sim.params.RCCL_TUNING_SET`).
"""

from __future__ import annotations

from dataclasses import dataclass
from types import MappingProxyType
from typing import Final

__all__ = [
    "BW_RATIO",
    "GFX",
    "NODE_MODELS",
    "PIVOT_TREE_CHANNELS",
    "PIVOT_TREE_MAX_BYTES",
    "RING_CORRECTION",
    "ROME_MODEL_56_LINKS",
    "ROME_MODEL_56_TREES",
    "TREE_CORRECTION",
    "XGMI_WIDTH",
    "RcclNode",
    "after_pick",
    "bus_bandwidth",
    "correction",
    "xgmi_width",
]

_PROTOS: Final = ("ll", "ll128", "simple")


def _row(
    tree: tuple[float, float, float], ring: tuple[float, float, float]
) -> MappingProxyType[str, MappingProxyType[str, float]]:
    """{algorithm: {protocol: ratio}} from RCCL's (LL, LL128, Simple) triples."""
    return MappingProxyType(
        {
            a: MappingProxyType(dict(zip(_PROTOS, v, strict=True)))
            for a, v in (("tree", tree), ("ring", ring))
        }
    )


def _factors(
    *rows: tuple[float, ...],
) -> MappingProxyType[str, tuple[float, ...]]:
    """{protocol: 27 factors} from RCCL's three rows (LL, LL128, Simple)."""
    return MappingProxyType(dict(zip(_PROTOS, rows, strict=True)))


#: ``bwRatio`` [tuning set] -> (two nodes or fewer, more than two) {algorithm: {protocol: x}}:
#: ``busBw`` is multiplied by it instead of NCCL's refinements (tuning.cc lines 376-381).
BW_RATIO: Final = MappingProxyType(
    {
        1: (  # lines 116, 118: two nodes or fewer, more
            _row(tree=(0.12, 1.0, 0.99), ring=(0.12, 1.0, 1.0)),
            _row(tree=(0.15, 1.0, 0.42), ring=(0.2, 1.0, 1.0)),
        ),
        4: (  # lines 206, 208: two nodes or fewer, more
            _row(tree=(0.16, 1.09, 1.61), ring=(0.15, 0.41, 1.0)),
            _row(tree=(0.16, 1.09, 1.08), ring=(0.15, 0.41, 1.0)),
        ),
        5: (  # lines 236, 238: two nodes or fewer, more
            _row(tree=(0.06, 0.0, 0.11), ring=(0.08, 0.0, 1.0)),
            _row(tree=(0.06, 0.0, 0.59), ring=(0.08, 0.0, 1.0)),
        ),
    }
)
#: ``treeCorrectionFactor`` [tuning set][protocol][log2(nBytes / 64), the last beyond]: Tree
#: bandwidth x it at every size (tuning.cc lines 650-654).
TREE_CORRECTION: Final = MappingProxyType(
    {
        1: _factors(  # lines 122-124
            (0.5, 0.4, 0.7, 0.6, 1.0, 1.0, 0.5, 0.4, 0.1, 0.5, 0.4, 0.6, 1.0, 1.0,
             1.0, 1.0, 1.0, 0.8, 0.6, 0.5, 0.4, 0.4, 0.3, 0.2, 0.1, 0.1, 0.1),
            (0.5, 0.4, 0.7, 0.6, 1.0, 1.0, 0.5, 0.4, 0.1, 0.5, 0.4, 0.6, 1.0, 1.0,
             1.0, 1.0, 1.0, 0.8, 0.6, 0.5, 0.4, 0.4, 0.3, 0.2, 0.1, 0.1, 0.1),
            (0.1, 0.1, 0.1, 0.1, 0.1, 0.3, 0.4, 0.5, 0.1, 0.6, 1.0, 1.0, 1.0, 0.6,
             0.5, 0.7, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 0.7, 0.5, 0.3, 0.3),
        ),
        4: _factors(  # lines 212-214
            (0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 1.0, 0.1, 0.1, 0.2, 0.4, 0.6,
             0.5, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1),
            (0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.2, 0.1, 0.1, 0.2, 1.0,
             0.5, 0.2, 0.2, 0.2, 0.2, 0.2, 0.2, 0.2, 0.2, 0.2, 0.2, 0.2, 0.2),
            (1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 0.8, 0.4, 0.3, 0.3, 0.1, 0.1,
             1.0, 1.0, 0.7, 0.5, 0.6, 0.5, 0.6, 0.6, 0.5, 0.6, 0.6, 0.6, 0.7),
        ),
        5: _factors(  # lines 242-244
            (0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 1.0, 1.0, 1.0, 1.0, 1.0, 0.6, 1.0, 0.9,
             1.0, 1.0, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1),
            (0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0,
             0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0),
            (0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1,
             0.1, 0.7, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 0.8),
        ),
    }
)  # fmt: skip
#: ``ringCorrectionFactor`` [tuning set][protocol][log2(nBytes / 64)]: Ring bandwidth x it, on
#: several nodes only (tuning.cc lines 655-658).
RING_CORRECTION: Final = MappingProxyType(
    {
        1: _factors(  # lines 128-130
            (1.0, 0.5, 1.0, 1.0, 0.6, 0.7, 1.0, 1.0, 0.2, 1.0, 0.9, 0.7, 1.0, 1.0,
             1.0, 0.9, 0.9, 0.8, 0.8, 0.7, 0.6, 0.5, 0.5, 0.3, 0.2, 0.1, 0.1),
            (1.0, 0.5, 1.0, 1.0, 0.6, 0.7, 1.0, 1.0, 0.2, 1.0, 0.9, 0.7, 1.0, 1.0,
             1.0, 0.9, 0.9, 0.8, 0.8, 0.7, 0.6, 0.5, 0.5, 0.3, 0.2, 0.1, 0.1),
            (0.3, 1.0, 0.3, 0.1, 0.1, 0.1, 0.3, 0.7, 1.0, 0.2, 0.1, 0.1, 0.1, 0.1,
             0.1, 0.1, 0.1, 0.1, 0.1, 0.2, 0.3, 0.5, 0.9, 1.0, 1.0, 1.0, 1.0),
        ),
        4: _factors(  # lines 218-220
            (0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.2, 0.2, 0.1,
             0.3, 0.1, 0.1, 0.1, 0.2, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1),
            (0.4, 0.5, 0.5, 0.4, 0.4, 0.4, 0.4, 0.2, 0.2, 0.1, 0.3, 1.0, 1.0, 0.7,
             0.8, 0.5, 1.0, 1.0, 1.0, 1.0, 1.0, 0.9, 0.8, 0.5, 0.4, 0.3, 0.3),
            (0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 1.0, 1.0, 0.8, 0.5, 0.1,
             0.7, 0.2, 0.4, 0.4, 0.6, 0.7, 0.9, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0),
        ),
        5: _factors(  # lines 248-250
            (0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 1.0, 0.2, 1.0,
             0.4, 0.4, 0.1, 0.2, 0.2, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1),
            (0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0,
             0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0),
            (0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1,
             0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.8, 1.0, 1.0, 1.0),
        ),
    }
)  # fmt: skip
#: Catalog architecture -> the gfx name RCCL tests (``IsArchMatch`` is a prefix test:
#: "gfx94" matches gfx942, not gfx950).
GFX: Final = MappingProxyType({"cdna2": "gfx90a", "cdna3": "gfx942", "cdna4": "gfx950"})
#: ``ncclTopoXGMISpeed`` (src/graph/topo.h lines 31-33, 258-265): GB/s per xGMI link as RCCL
#: counts it, by gfx name: MI200 (gfx90a) 36, gfx94x 48, anything else (VEGA) 24.
XGMI_WIDTH: Final = MappingProxyType({"gfx90a": 36.0, "gfx942": 48.0})
_XGMI_DEFAULT: Final = 24.0


@dataclass(frozen=True)
class RcclNode:
    """What RCCL's matched node model (``rome_models.cc`` ``options``, parsed at lines
    1355-1380) sets for the model: the ``tuning`` set, ``ll128Enabled``, ``baseBw`` (GB/s, 0:
    none; it replaces ``nChannels x bw``, tuning.cc line 369), ``treeDefined``,
    ``pivotA2ANumBiRings``, how many rings its ``ringBase`` lists for this node (the ring
    graph's ``nChannels``, parseGraph, line 1228) and its GPUs per node (``nGpus``). Where it
    defines trees: its ``treeBase`` string (GPUs by the model's numbering; parsed by
    :func:`scaleup.tune.rccl_trees.parse_tree_base`) and its ``connMatrix`` as (GPU, GPU, xGMI
    links) for each linked pair, which RCCL matches to the node's GPUs."""

    tuning: int
    rings: int
    gpus: int
    ll128: bool = False
    base_bw: float = 0.0
    tree_defined: bool = False
    pivot_birings: int = 0
    source: str = ""
    tree_base: str = ""
    links: tuple[tuple[int, int, int], ...] = ()


#: rome_model_56's ``treeBase`` (rome_models.cc line 377), verbatim: 12 trees over its 16 GCDs,
#: each a root with two chains (of 8 and 7 GCDs), every edge one xGMI link.
ROME_MODEL_56_TREES: Final = (
    "(0(1(3(2(6(7(15(14(10))))))))(4(5(13(12(8(9(11))))))))|"
    "(2(3(7(6(13(12(8(9(10))))))))(1(0(4(5(14(15(11))))))))|"
    "(14(15(11(10(8(9(13(12(4))))))))(6(7(3(2(0(1(5))))))))|"
    "(10(11(9(8(12(13(5(4(0))))))))(14(15(7(6(2(3(1))))))))|"
    "(10(11(15(14(5(4(0(1(2))))))))(9(8(12(13(6(7(3))))))))|"
    "(4(5(1(0(2(3(7(6(14))))))))(12(13(9(8(10(11(15))))))))|"
    "(6(7(15(14(10(11(9(8(12))))))))(2(3(1(0(4(5(13))))))))|"
    "(13(12(8(9(10(11(15(14(5))))))))(6(7(3(2(1(0(4))))))))|"
    "(8(9(13(12(4(5(1(0(2))))))))(10(11(15(14(6(7(3))))))))|"
    "(12(13(5(4(0(1(3(2(6))))))))(8(9(11(10(14(15(7))))))))|"
    "(5(4(0(1(2(3(7(6(13))))))))(14(15(11(10(9(8(12))))))))|"
    "(2(3(7(6(14(15(11(10(8))))))))(0(1(5(4(12(13(9))))))))"
)
#: rome_model_56's ``connMatrix`` (line 371; 16 x 16 xGMI link counts) as its linked pairs
#: (GPU, GPU, links): in-package pairs 4 links, the rest 1 or 2.
ROME_MODEL_56_LINKS: Final = (
    (0, 1, 4), (0, 2, 1), (0, 4, 2), (1, 2, 1), (1, 3, 1), (1, 5, 1), (2, 3, 4),
    (2, 6, 1), (3, 7, 2), (4, 5, 4), (4, 12, 1), (5, 13, 1), (5, 14, 1), (6, 7, 4),
    (6, 13, 1), (6, 14, 1), (7, 15, 1), (8, 9, 4), (8, 10, 1), (8, 12, 2), (9, 10, 1),
    (9, 11, 1), (9, 13, 1), (10, 11, 4), (10, 14, 1), (11, 15, 2), (12, 13, 4), (14, 15, 4),
)  # fmt: skip


#: (catalog architecture, several nodes) -> the node model RCCL matches for the catalog's AMD
#: nodes (the same matches as :data:`scaleup.sim.params.RCCL_TUNING_SET`). CDNA4 (MI355X) has
#: no node model in this RCCL snapshot: ESTIMATE, the MI300X ones (same 8-GPU full mesh).
NODE_MODELS: Final = MappingProxyType(
    {
        ("cdna3", False): RcclNode(5, 28, 8, source="rome_model_79, lines 549-560"),
        ("cdna3", True): RcclNode(5, 64, 8, source="rome_model_81, lines 575-816"),
        ("cdna4", False): RcclNode(5, 28, 8, source="ESTIMATE: rome_model_79"),
        ("cdna4", True): RcclNode(5, 64, 8, source="ESTIMATE: rome_model_81"),
        ("cdna2", False): RcclNode(
            1,
            6,
            16,
            tree_defined=True,
            pivot_birings=3,
            source="rome_model_56, lines 366-378",
            tree_base=ROME_MODEL_56_TREES,
            links=ROME_MODEL_56_LINKS,
        ),  # fmt: skip
        ("cdna2", True): RcclNode(
            4, 32, 16, ll128=True, base_bw=161.4, source="rome_model_59 / _65, lines 393-443"
        ),
    }
)


def xgmi_width(gfx: str) -> float:
    """``ncclTopoXGMISpeed`` of a gfx name (GB/s per link).

    >>> xgmi_width("gfx942"), xgmi_width("gfx950")
    (48.0, 24.0)
    """
    return XGMI_WIDTH.get(gfx, _XGMI_DEFAULT)


def bus_bandwidth(
    node: RcclNode, gfx: str, collective: str, algo: str, proto: str, nnodes: int, bus: float
) -> float:
    """RCCL's ``busBw`` of one (collective, algorithm, protocol) from NCCL's ``nChannels x bw``
    (tuning.cc lines 369-381): ``baseBw`` where the node model sets one, x ``bwRatio``, and
    x1.65 for Ring LL broadcast / reduce on one gfx94 node; 0 where LL128 is off (lines
    509-517: only on gfx90a with ``ll128Enabled``; RCCL is built with ``ENABLE_LL128``,
    CMakeLists.txt lines 213-216, 724-726).

    >>> bus_bandwidth(NODE_MODELS["cdna3", False], "gfx942", "all_reduce", "ring", "ll", 1, 336.0)
    26.88
    """
    if node.base_bw:
        bus = node.base_bw
    bus *= BW_RATIO[node.tuning][0 if nnodes <= 2 else 1][algo][proto]
    one_node_gfx94 = nnodes == 1 and gfx.startswith("gfx94")
    if (algo, proto) == ("ring", "ll") and collective in ("broadcast", "reduce") and one_node_gfx94:
        bus *= 1.65
    if proto == "ll128" and not (gfx == "gfx90a" and node.ll128):
        return 0.0
    return bus


def correction(node: RcclNode, algo: str, proto: str, nnodes: int, nbytes: int) -> float:
    """``ncclTopoGetAlgoTime``'s factor on the bandwidth (tuning.cc lines 648-658): Tree's at
    every size, Ring's across nodes, indexed by RCCL's ``log2i(nBytes >> 6)`` (utils.h lines
    46-50: 0 for 0) and the last entry beyond; 1 otherwise.

    >>> correction(NODE_MODELS["cdna3", False], "tree", "ll", 1, 8)  # log2i(0) = 0
    0.1
    """
    log_size = max(0, (nbytes >> 6).bit_length() - 1)
    if algo == "tree":
        return TREE_CORRECTION[node.tuning][proto][min(log_size, 26)]
    if algo == "ring" and nnodes > 1:
        return RING_CORRECTION[node.tuning][proto][min(log_size, 26)]
    return 1.0


#: ``getChannnelThreadInfo`` (src/enqueue.cc lines 1697-1718): on a node model with
#: ``pivotA2ANumBiRings=3`` an all_reduce of at most this many bytes runs Tree LL on
#: min(24, nChannels) channels, a larger one Ring Simple, whatever the model picked.
PIVOT_TREE_MAX_BYTES: Final = 2200008
PIVOT_TREE_CHANNELS: Final = 24


def after_pick(
    node: RcclNode, collective: str, nbytes: int, algo: str, proto: str, comm_channels: int
) -> tuple[str, str, int | None]:
    """What ``getChannnelThreadInfo`` (enqueue.cc lines 1697-1724) makes of the model's pick:
    (algorithm, protocol, channels; None where the size trims them as usual). All_reduce only:
    the pivot node model's rule (:data:`PIVOT_TREE_MAX_BYTES`), else ``treeDefined`` turns the
    pick into Tree on the same protocol (line 1720).

    >>> after_pick(NODE_MODELS["cdna2", False], "all_reduce", 1024, "ring", "ll", 24)
    ('tree', 'll', 24)
    """
    if collective != "all_reduce":
        return algo, proto, None
    if node.pivot_birings == 3:
        if nbytes <= PIVOT_TREE_MAX_BYTES:
            return "tree", "ll", min(PIVOT_TREE_CHANNELS, comm_channels)
        return "ring", "simple", None
    if node.tree_defined:
        return "tree", proto, None
    return algo, proto, None
