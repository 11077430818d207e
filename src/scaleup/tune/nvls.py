"""NVLS enable rules as NCCL has them, and the NVLS-Tree builder's parameters on a topology.

The rules follow NCCL 2.30.7 (NVIDIA/nccl @5067397c, ``makefiles/version.mk``):

- ``src/include/device.h`` ``ncclNvlsSupported(devRedOp, type)`` (kept in sync with the
  kernel list of ``src/device/generate.py``): the switch reduces ``sum`` for float32 and
  float64; ``sum``, ``min`` and ``max`` for float16, bfloat16, int32, uint32, int64 and uint64;
  never ``prod``, never 8-bit types (int8, uint8, fp8). ``src/enqueue.cc`` lets all_gather use
  NVLS whatever the type (it does not reduce). ``avg`` never: ``hostToDevRedOp`` turns it into
  ``ncclDevPreMulSum`` (floats) or ``ncclDevSumPostDiv`` (integers), neither of which
  ``ncclNvlsSupported`` accepts.
- ``src/device/generate.py``: NVLS kernels exist for all_reduce, all_gather and reduce_scatter;
  NVLS_TREE for all_reduce only; broadcast and reduce are ring-only.
- ``src/graph/tuning.cc`` (``ncclTopoTuneModel``): NVLS and NVLS_TREE need at least two channels
  and run the Simple protocol only; NVLS_TREE is disabled on one node; NVLS across nodes is
  disabled without CollNet, and so is NVLS all_gather / reduce_scatter across nodes (their busBw
  is set to 0 without a CollNet plugin). CollNet (SHARP in the scale-out fabric) is not modelled,
  so across nodes only NVLS_TREE remains, for all_reduce.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from scaleup.collectives.spec import DTYPES
from scaleup.topology import analysis
from scaleup.topology.model import Topology
from scaleup.tune.channel_plan import ChannelPlan
from scaleup.tune.channel_search import NCCL_MAX_NVLS_ARITY, nvls_heads

__all__ = [
    "MIN_NVLS_CHANNELS",
    "NVLS_ALGORITHMS",
    "NVLS_COLLECTIVES",
    "nvls_disabled",
    "nvls_reduces",
    "nvls_tree_params",
    "server_block",
]

#: NCCL's in-switch algorithms (the library's names for NCCL_ALGO_NVLS and NCCL_ALGO_NVLS_TREE).
NVLS_ALGORITHMS = frozenset({"nvls", "nvls_tree"})
#: Collectives NCCL has kernels for, per in-switch algorithm (``src/device/generate.py``).
NVLS_COLLECTIVES = {
    "nvls": frozenset({"all_reduce", "all_gather", "reduce_scatter"}),
    "nvls_tree": frozenset({"all_reduce"}),
}
#: ``if (graphs[a]->nChannels < 2) continue;`` for NVLS and NVLS_TREE (``tuning.cc``).
MIN_NVLS_CHANNELS = 2
#: ``ncclNvlsSupported``: the reductions the switch does, per canonical dtype.
_SWITCH_REDOPS = {
    "float32": frozenset({"sum"}),
    "float64": frozenset({"sum"}),
    **{
        t: frozenset({"sum", "min", "max"})
        for t in ("float16", "bfloat16", "int32", "uint32", "int64", "uint64")
    },
}
_REDUCING = frozenset({"all_reduce", "reduce_scatter", "reduce"})


def nvls_reduces(dtype: str, redop: str) -> bool:
    """Whether an NVLink SHARP switch reduces ``redop`` on ``dtype`` (``ncclNvlsSupported``).

    >>> nvls_reduces("float32", "sum"), nvls_reduces("float32", "max"), nvls_reduces("int8", "sum")
    (True, False, False)
    >>> nvls_reduces("bfloat16", "max"), nvls_reduces("half", "min"), nvls_reduces("half", "prod")
    (True, True, False)
    """
    key = DTYPES.get(str(dtype).lower())
    return key is not None and redop in _SWITCH_REDOPS.get(key, frozenset())


def nvls_disabled(
    algorithm: str,
    collective: str,
    *,
    dtype: str = "float32",
    redop: str = "sum",
    channels: int | None = None,
    multi_node: bool = False,
    family: str = "nccl",
    domain_ranks: int = 0,
) -> str | None:
    """Why NCCL would not run ``algorithm`` (``nvls`` or ``nvls_tree``) here, or None.

    The switch's own limits (dtype and reduction) hold for every family; which collectives have
    NVLS kernels, the channel floor and the multi-node rules are NCCL's, so ``family="all"``
    keeps our other NVLS schedules (broadcast, reduce) and channel counts. ``domain_ranks``: the
    most ranks of the group on one NVLink domain of NVIDIA parts (NCCL's ``localRanks``; 0 where
    the parts are not NVIDIA's): NVLS all_gather and reduce_scatter need at most
    ``NCCL_MAX_NVLS_ARITY`` = 32 there (enqueue.cc lines 2004-2006).

    >>> nvls_disabled("nvls", "all_gather", domain_ranks=72)[:42]
    'NCCL runs nvls all_gather on at most 32 ra'
    >>> nvls_disabled("nvls", "all_reduce", domain_ranks=72) is None
    True
    """
    if algorithm not in NVLS_ALGORITHMS:
        return None
    if collective in _REDUCING and not nvls_reduces(dtype, redop):
        return f"the switch does not reduce {redop} on {dtype} (NCCL ncclNvlsSupported)"
    if family != "nccl":
        return None
    if collective not in NVLS_COLLECTIVES[algorithm]:
        return f"NCCL has no {algorithm} kernel for {collective} (src/device/generate.py)"
    if collective != "all_reduce" and domain_ranks > NCCL_MAX_NVLS_ARITY:
        return (
            f"NCCL runs {algorithm} {collective} on at most {NCCL_MAX_NVLS_ARITY} ranks per "
            f"NVLink domain, not {domain_ranks} (enqueue.cc, NCCL_MAX_NVLS_ARITY)"
        )
    if channels is not None and channels < MIN_NVLS_CHANNELS:
        return f"{algorithm} needs at least {MIN_NVLS_CHANNELS} channels (NCCL tuning.cc)"
    if algorithm == "nvls" and multi_node:
        return "NCCL disables nvls across nodes without CollNet (tuning.cc); nvls_tree applies"
    if algorithm == "nvls_tree" and not multi_node:
        return "NCCL disables nvls_tree on a single node (tuning.cc)"
    return None


def server_block(topology: Topology, ranks: Sequence[int] | None = None) -> int | None:
    """Ranks per server when the group fills two or more servers in equal consecutive blocks
    (the layout the hierarchical builders take), else None."""
    nodes = analysis.rank_nodes(topology, ranks)
    servers = len(set(nodes))
    if servers < 2 or len(nodes) % servers:
        return None
    g = len(nodes) // servers
    blocks = [nodes[i : i + g] for i in range(0, len(nodes), g)]
    if any(len(set(b)) != 1 for b in blocks) or len({b[0] for b in blocks}) != servers:
        return None
    return g


def nvls_tree_params(
    topology: Topology, ranks: Sequence[int] | None = None, plan: ChannelPlan | None = None
) -> dict[str, Any]:
    """The ``nvls_tree`` builder's parameters for a group: its server size and one head per NIC
    (``plan``, default :func:`~scaleup.tune.channel_search.nvls_heads`: the rank nearest each NIC
    of the first server, as local ranks; every server's wiring is the same on the presets)."""
    g = server_block(topology, ranks) or len(analysis.rank_nodes(topology, ranks))
    plan = nvls_heads(topology, ranks) if plan is None else plan
    heads = tuple(sorted({ch.segments[0].ranks[0] % g for ch in plan.channels}))
    return {"ranks_per_node": g, "heads": heads or None}
