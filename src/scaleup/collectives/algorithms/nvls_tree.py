"""NVLS-Tree (``nvls_tree``, NCCL's ``NVLS_TREE``): all_reduce across servers whose NVLink
switches reduce (NVLink SHARP).

NCCL's names map to the library's as its collectives do (``ncclFuncAllReduce`` ->
``all_reduce``): ``NCCL_ALGO_NVLS_TREE`` (``NCCL_ALGO=NVLSTree``) -> ``nvls_tree``.

Ranks ``N * g .. N * g + g - 1`` form server ``N`` (``g = ranks_per_node``; default: the whole
world is one server). Every lane (``chunks x channels`` near-equal regions of the count, channel
tag = channel) is cut into one slice per *head*: ``heads`` lists the local ranks that head a
slice (default every local rank; the tuner passes one per NIC, NCCL's ``nvlsHeads``). Slice
``h`` of a lane, with ``head(N) = N * g + heads[h]``:

1. in every server ``N``: a ``switch_reduce`` of the slice from the ``g`` ranks' inputs into
   ``head(N)``'s output (``multimem.ld_reduce``: the switch reads every rank's slice and
   returns the sum to the head);
2. across servers, among the ``m = n / g`` heads of slice ``h``: reduce up NCCL's double binary
   tree over the servers (``ncclGetDtree``; channel ``c`` rides tree ``c % 2``, as
   ``connectNvls`` in NCCL's ``src/graph/connect.cc`` sets ``treeUp[c % 2]``), every head
   accumulating its subtree into its output, then copy the sum back down;
3. in every server ``N``: a ``switch_reduce`` with one source, ``head(N)``'s output, into the
   outputs of all ``g`` ranks (``multimem.st``: one copy up, replicated by the switch).

::

    2 servers x 4 ranks, heads (0, 1, 2, 3), slice 1 of channel 0 (tree 0: server 1 under 0)
    phase 1   server N: sw-reduce inputs of N.0..N.3 -> N.1
    phase 2   1.1 -R-> 0.1 (0.1 holds the sum), then 0.1 -C-> 1.1
    phase 3   server N: N.1 -multicast-> N.0..N.3

Each rank sends its whole buffer into its switch and receives it back (``S`` each way), a head
also ``S / H`` each way for its own slice; a head sends and receives ``S / H`` through its NIC
per tree edge. With ``chunks > 1`` every op of chunk ``c`` also waits for the same op of chunk
``c - 1`` (a channel's thread block runs its chunks in order), so chunk ``c`` crosses the servers
while chunk ``c + 1`` is reduced in the switches. With one server the tree is empty: NVLS with a
reduction into heads followed by a multicast.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from scaleup.collectives.algorithms._common import check_int, split
from scaleup.collectives.algorithms.tree import dtree_parents
from scaleup.collectives.build import ScheduleBuilder
from scaleup.collectives.schedule import Chunk, OpKind, Schedule
from scaleup.collectives.spec import CollectiveSpec
from scaleup.errors import UsageError

__all__ = ["BUILDERS", "PARAMS", "check", "normalise"]

PARAMS: dict[str, Any] = {"channels": 1, "chunks": 1, "ranks_per_node": None, "heads": None}


def normalise(spec: CollectiveSpec, params: dict[str, Any]) -> dict[str, Any]:
    """Validate ``channels``, ``chunks``, ``ranks_per_node`` (default: the world size) and
    ``heads`` (default: every local rank)."""
    rpn = params.get("ranks_per_node")
    g = spec.nranks if rpn is None else check_int("ranks_per_node", rpn)
    heads = params.get("heads")
    heads = tuple(range(g)) if heads is None else _heads(heads)
    return {
        **params,
        "channels": check_int("channels", params.get("channels", 1)),
        "chunks": check_int("chunks", params.get("chunks", 1)),
        "ranks_per_node": g,
        "heads": heads,
    }


def _heads(value: Any) -> tuple[int, ...]:
    if isinstance(value, (str, bytes)) or not isinstance(value, Sequence) or not value:
        raise UsageError(
            f"heads must be a non-empty list of local ranks, got {value!r}", source="heads"
        )
    heads = tuple(check_int("heads", h, minimum=0) for h in value)
    if len(set(heads)) != len(heads):
        raise UsageError(f"heads must be distinct, got {list(heads)}", source="heads")
    return heads


def check(spec: CollectiveSpec, params: dict[str, Any]) -> str | None:
    """The world size must be a multiple of ``ranks_per_node``; heads must be local ranks."""
    g = params["ranks_per_node"]
    if spec.nranks > 1 and spec.nranks % g:
        return f"world size {spec.nranks} is not a multiple of ranks_per_node={g}"
    if spec.nranks > 1 and max(params["heads"]) >= g:
        return f"heads {list(params['heads'])} are not all local ranks 0..{g - 1}"
    return None


class _Lanes:
    """Adds the ops of one lane after another; with ``chained``, op ``j`` of chunk ``c`` also
    waits for op ``j`` of chunk ``c - 1`` (every chunk has the same ops then)."""

    def __init__(self, b: ScheduleBuilder, chained: bool) -> None:
        self.b, self.chained = b, chained
        self.prev: list[int] = []
        self.cur: list[int] = []

    def next_chunk(self) -> None:
        self.prev, self.cur = self.cur, []

    def add(self, kind: OpKind, srcs: list[Chunk], dsts: list[Chunk], issuer: int,
            deps: list[int], channel: int, step: int) -> int:  # fmt: skip
        if self.chained and self.prev:
            deps = [*deps, self.prev[len(self.cur)]]
        b = self.b
        if kind is OpKind.SWITCH_REDUCE:
            op = b.switch_reduce(srcs, dsts, rank=issuer, deps=deps, channel=channel, step=step)
        elif kind is OpKind.REDUCE:
            op = b.reduce(srcs[0], dsts[0], rank=issuer, deps=deps, channel=channel, step=step)
        else:
            op = b.copy(srcs[0], dsts[0], rank=issuer, deps=deps, channel=channel, step=step)
        self.cur.append(op)
        return op


def _depths(parents: list[int]) -> list[int]:
    depth = [0] * len(parents)
    for v in range(len(parents)):
        u = v
        while parents[u] >= 0:
            u = parents[u]
            depth[v] += 1
    return depth


def _slice(lanes: _Lanes, g: int, head: list[int], parents: list[int], offset: int,
           count: int, channel: int) -> None:  # fmt: skip
    """The three phases of one slice (``head[N]``: its head rank in server ``N``)."""
    b, m = lanes.b, len(head)
    depth = _depths(parents)
    top = max(depth)
    last = [
        lanes.add(OpKind.SWITCH_REDUCE, [b.input(N * g + r, offset, count) for r in range(g)],
                  [b.output(head[N], offset, count)], head[N], [], channel, 0)
        for N in range(m)
    ]  # fmt: skip
    up_order = sorted(range(m), key=lambda v: (-depth[v], v))
    for v in up_order:  # children before parents: each head sends its whole subtree's sum
        p = parents[v]
        if p >= 0:
            last[p] = lanes.add(
                OpKind.REDUCE, [b.output(head[v], offset, count)],
                [b.output(head[p], offset, count)], head[p], [last[v], last[p]], channel,
                1 + top - depth[v],
            )  # fmt: skip
    sent = [[op] for op in last]  # ops that must precede the multicast rewriting a head
    for v in reversed(up_order):  # parents before children: the sum comes back down
        p = parents[v]
        if p >= 0:
            last[v] = lanes.add(
                OpKind.COPY, [b.output(head[p], offset, count)],
                [b.output(head[v], offset, count)], head[p], [last[p]], channel, top + depth[v],
            )  # fmt: skip
            sent[p].append(last[v])
            sent[v] = [last[v]]
    for N in range(m):
        lanes.add(OpKind.SWITCH_REDUCE, [b.output(head[N], offset, count)],
                  [b.output(N * g + r, offset, count) for r in range(g)], head[N], sent[N],
                  channel, 1 + 2 * top)  # fmt: skip


def all_reduce(spec: CollectiveSpec, params: dict[str, Any]) -> Schedule:
    n, g, heads = spec.nranks, params["ranks_per_node"], params["heads"]
    m, k, chunks = n // g, params["channels"], params["chunks"]
    b = ScheduleBuilder(spec, "nvls_tree", params=params, infer_deps=False)
    reg_off, reg_size = split(spec.count, k * chunks)  # lane = chunk * k + channel
    lanes = _Lanes(b, chained=int(reg_size.min()) >= len(heads))
    trees = dtree_parents(m)
    for c in range(chunks):
        lanes.next_chunk()
        for ch in range(k):
            lane = c * k + ch
            rel, size = split(int(reg_size[lane]), len(heads))
            for h, local in enumerate(heads):
                if size[h]:
                    head = [N * g + local for N in range(m)]
                    offset = int(reg_off[lane] + rel[h])
                    _slice(lanes, g, head, trees[ch % 2], offset, int(size[h]), ch)
    return b.build()


BUILDERS = {"all_reduce": all_reduce}
