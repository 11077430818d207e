"""How big a schedule will be, known before it is built, so that a huge one is refused first.

The size of a schedule is counted in *op-equivalents*: half the chunks its ops read and write
(``(sources + destinations) / 2``), which is the op count for copies and reduces and counts a
multicast ``switch_reduce`` once per chunk it touches. Every builder makes its schedule from
``channels x chunks`` independent *lanes* of one shape, so the size is

    lanes x (op-equivalents of one lane, a function of the world size)

and the per-lane bounds below are upper bounds for every builder (checked against the builders
for world sizes 1..32 by ``tests/collectives/test_estimate.py``), tight within a small factor:

==================  =====================================================================
``3 n^2``           rings of reduce-scatter/all-reduce/all-gather, direct all-to-all and
                    one/two-shot all-reduce (every rank exchanges a block with every peer)
``2 n^2``           NVLS (n multicast ops of n sources and n destinations each)
``n (2 log n + 3)`` recursive halving-doubling
``6 n``             trees, chains (ring/direct broadcast, reduce, send_recv)
``2 n``             NVLS broadcast and reduce (one multicast of n chunks)
``6 n (r + n/r) + n``  hierarchical with ``r`` ranks per node: rings inside and across nodes
``h (n/r) (r + 4)``     NVLS-Tree, ``h`` heads of ``r`` ranks per node: a reduction of ``r``
                    sources and a multicast to ``r`` per server and head, two tree hops and
                    at most one local fold of a child's landed sum
``n (3 s + 1)``     torus all_reduce, ``s = sum(k_d - 1)``: per rank one reduce and one
                    copy per step and at most ``s`` input copies (its reduce_scatter and
                    all_gather pass groups of blocks, one op per block: quadratic, as the
                    ring's)
==================  =====================================================================

A ``bidirectional`` ring runs every lane both ways round: twice the ops (a bidirectional torus
only turns some lanes round: the same ops).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from scaleup.collectives.spec import CollectiveSpec
from scaleup.limits import (
    BYTES_PER_OP,
    MAX_CHANNELS,
    MAX_CHUNKS,
    MAX_SCHEDULE_OPS,
    check_at_most,
    check_memory,
)

__all__ = ["check_schedule_size", "estimate_ops"]

PerLane = Callable[[int, Mapping[str, Any]], int]


def _quadratic(n: int, params: Mapping[str, Any]) -> int:
    return 3 * n * n


def _multicast(n: int, params: Mapping[str, Any]) -> int:
    return 2 * n * n


def _nlogn(n: int, params: Mapping[str, Any]) -> int:
    return n * (2 * n.bit_length() + 3)


def _linear(n: int, params: Mapping[str, Any]) -> int:
    return 6 * n


def _fan(n: int, params: Mapping[str, Any]) -> int:
    return 2 * n


def _hierarchical(n: int, params: Mapping[str, Any]) -> int:
    per_node = max(1, int(params.get("ranks_per_node") or 1))
    return 6 * n * (per_node + -(-n // per_node)) + n


def _nvls_tree(n: int, params: Mapping[str, Any]) -> int:
    per_node = max(1, int(params.get("ranks_per_node") or n))
    heads = len(params.get("heads") or range(per_node))
    return heads * -(-n // per_node) * (per_node + 4)


def _torus(n: int, params: Mapping[str, Any]) -> int:
    steps = sum(int(k) - 1 for k in params.get("dims") or (n,))
    return n * (3 * steps + 1)


_CHAINS = {"broadcast": _linear, "reduce": _linear, "send_recv": _linear}

#: algorithm -> collective -> op-equivalents of one lane; ``"*"`` for the other collectives.
PER_LANE: dict[str, dict[str, PerLane]] = {
    "ring": {"*": _quadratic, **_CHAINS},
    "direct": {"*": _quadratic, **_CHAINS},
    "allpairs": {"*": _quadratic},
    "tree": {"*": _linear},
    "recursive": {"*": _nlogn},
    "nvls": {"*": _multicast, "broadcast": _fan, "reduce": _fan},
    "hierarchical": {"*": _hierarchical},
    "nvls_tree": {"*": _nvls_tree},
    "torus": {"*": _torus, "all_gather": _quadratic, "reduce_scatter": _quadratic},
}


def estimate_ops(algorithm: str, spec: CollectiveSpec, params: Mapping[str, Any]) -> int:
    """An upper bound on the op-equivalents of ``algorithm``'s schedule for ``spec``.

    ``params`` are the normalised parameters (``channels`` and ``chunks`` filled in). An
    algorithm not in :data:`PER_LANE` (a user's) gets the quadratic bound.

    >>> from scaleup.collectives.spec import CollectiveSpec
    >>> estimate_ops("ring", CollectiveSpec("all_reduce", 4, 8), {"channels": 2, "chunks": 1})
    96
    """
    n = spec.nranks
    if n == 1:
        return 1
    table = PER_LANE.get(algorithm, {})
    per_lane = table.get(spec.collective, table.get("*", _quadratic))
    lanes = int(params.get("channels", 1)) * int(params.get("chunks", 1))
    if algorithm == "ring" and params.get("bidirectional"):
        lanes *= 2
    return lanes * per_lane(n, params)


def check_schedule_size(algorithm: str, spec: CollectiveSpec, params: Mapping[str, Any]) -> None:
    """Refuse (:class:`~scaleup.errors.LimitError`) a schedule with more channels or chunks than
    :mod:`scaleup.limits` allows, or whose estimate is over
    :data:`~scaleup.limits.MAX_SCHEDULE_OPS` or needs more memory than this machine has free.

    The error names the parameter that grew it most: ``chunks``, ``channels`` or ``ranks``.
    """
    channels, chunks = int(params.get("channels", 1)), int(params.get("chunks", 1))
    check_at_most(channels, MAX_CHANNELS, source="channels", name="MAX_CHANNELS")
    check_at_most(chunks, MAX_CHUNKS, source="chunks", name="MAX_CHUNKS")
    source = "ranks" if channels == chunks == 1 else "chunks" if chunks >= channels else "channels"
    ops = estimate_ops(algorithm, spec, params)
    what = f"a {algorithm} {spec.name} schedule of {channels} channels x {chunks} chunks"
    check_at_most(
        ops, MAX_SCHEDULE_OPS, source=source, name="MAX_SCHEDULE_OPS", what=f"ops in {what}"
    )
    check_memory(ops * BYTES_PER_OP, what=f"{what} (~{ops:,} ops)", source=source)
