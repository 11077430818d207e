"""Any :class:`~scaleup.collectives.schedule.Schedule` -> MSCCL XML (msccl-tools' ``<algo>``).

Mapping (read back by :mod:`scaleup.collectives.msccl_import` to the same ops):

- Chunk: the greatest common divisor of every count, offset and buffer size, so
  ``nchunksperloop = spec.count / chunk`` and each offset and ``cnt`` is whole chunks.
- A transfer from rank ``a`` to rank ``b`` on channel tag ``c``: an ``s`` step on ``a``'s tb
  ``(send=b, chan=c)`` and, on ``b``'s tb ``(recv=a, chan=c)``, an ``r`` step (copy) or an ``rrc``
  step whose ``src`` is its ``dst`` (reduce). One tb per (rank, peer, channel, direction), as
  MSCCL requires one sender and one receiver per connection; local copies and reductions
  (``cpy``, ``re``) go on one tb per (rank, channel) with no peers.
- Order: every tb runs its steps by the op's depth in the dependency graph (then op id), a
  topological order, so the k-th send and the k-th receive of a connection are one op.
- Dependencies: each step waits (``depid``/``deps``) for the steps on *its own gpu* of the ops
  its op depends on; dependencies on ops with no step on that gpu are carried by the transfers
  themselves, as MSCCL can only say. A step with more than one such wait is preceded by one
  ``nop`` per extra wait, as msccl-tools writes them. ``hasdep`` marks steps waited for.

Not expressible: ``switch_reduce`` (NVLS multicast has no MSCCL step) is refused; the redop
and root are not part of the format (MSCCL takes them from the call).
"""

from __future__ import annotations

from collections import defaultdict
from xml.sax.saxutils import quoteattr

import numpy as np

from scaleup.collectives.schedule import Buffer, OpKind, Schedule
from scaleup.errors import UsageError

__all__ = ["schedule_to_msccl_xml"]

_BUF = {Buffer.INPUT: "i", Buffer.OUTPUT: "o", Buffer.SCRATCH: "s"}
_PROTO = {"simple": "Simple", "ll": "LL", "ll128": "LL128"}
#: A tb: (rank, role, peer, channel); role 0 local, 1 send, 2 receive.
_Tb = tuple[int, int, int, int]


def _chunk(schedule: Schedule) -> int:
    """The largest element count that every count, offset and buffer size is a multiple of."""
    t, spec = schedule.table, schedule.spec
    values = np.concatenate([
        t.count, t.src_offset, t.dst_offset,
        [spec.count, spec.input_count, spec.output_count, schedule.scratch_count],
    ]).astype(np.int64)  # fmt: skip
    return int(np.gcd.reduce(values[values > 0])) if np.any(values > 0) else 1


def _depth(schedule: Schedule) -> list[int]:
    """Each op's longest dependency path (deps always precede their op in a Schedule)."""
    t = schedule.table
    depth = [0] * t.n_ops
    for i in range(t.n_ops):
        deps = t.deps_of(i)
        depth[i] = 1 + max((depth[int(d)] for d in deps), default=-1)
    return depth


def schedule_to_msccl_xml(schedule: Schedule, *, protocol: str | None = None) -> str:
    """The schedule as MSCCL XML text; ``protocol`` defaults to ``params['protocol']`` or simple.

    >>> from scaleup.collectives.algorithms import build_schedule
    >>> from scaleup.collectives.spec import CollectiveSpec
    >>> xml = schedule_to_msccl_xml(build_schedule("ring", CollectiveSpec("all_reduce", 2, 8)))
    >>> xml.splitlines()[0]
    '<algo name="ring" proto="Simple" nchannels="1" nchunksperloop="2" ngpus="2" coll="allreduce" inplace="0" outofplace="1">'
    """  # noqa: E501
    t = schedule.table
    switch = np.flatnonzero(t.kind == int(OpKind.SWITCH_REDUCE))
    if len(switch):
        raise UsageError(
            f"op {int(switch[0])} is a switch_reduce (NVLS); MSCCL XML has no multicast step",
            source="schedule",
        )
    proto = str(protocol or schedule.params.get("protocol", "simple")).lower()
    if proto not in _PROTO:
        raise UsageError(f"unknown protocol {proto!r} (simple, ll or ll128)", source="protocol")
    chunk = _chunk(schedule)
    steps = _Steps(schedule, chunk)
    spec = schedule.spec
    in_place = bool(schedule.params.get("in_place", False))
    head = (
        f'<algo name={quoteattr(schedule.algorithm)} proto="{_PROTO[proto]}" '
        f'nchannels="{int(t.channel.max(initial=0)) + 1}" '
        f'nchunksperloop="{spec.count // chunk}" ngpus="{spec.nranks}" '
        f'coll="{spec.collective.replace("_", "")}" inplace="{int(in_place)}" '
        f'outofplace="{int(not in_place)}">'
    )
    lines = [head]
    sizes = (spec.input_count // chunk, spec.output_count // chunk,
             schedule.scratch_count // chunk)  # fmt: skip
    for rank in range(spec.nranks):
        lines.append(
            f'  <gpu id="{rank}" i_chunks="{sizes[0]}" o_chunks="{sizes[1]}" s_chunks="{sizes[2]}">'
        )
        lines.extend(steps.gpu_lines(rank))
        lines.append("  </gpu>")
    lines.append("</algo>")
    return "\n".join(lines) + "\n"


class _Steps:
    """Every op's steps on its tbs, their order, waits and the XML lines of one gpu."""

    def __init__(self, schedule: Schedule, chunk: int) -> None:
        self.chunk = chunk
        t = schedule.table
        depth = _depth(schedule)
        self.tbs: dict[_Tb, list[tuple[int, str, tuple[str, int], tuple[str, int], int]]] = (
            defaultdict(list)
        )  # tb -> [(op, type, src, dst, cnt)]
        self.at: dict[tuple[int, int], tuple[_Tb, int]] = {}  # (op, rank) -> (tb, index)
        for i in sorted(range(t.n_ops), key=lambda i: (depth[i], i)):
            op = t.op(i)
            src, dst = op.srcs[0], op.dsts[0]
            s = (_BUF[Buffer(src.buffer)], src.offset // chunk)
            d = (_BUF[Buffer(dst.buffer)], dst.offset // chunk)
            cnt = op.count // chunk
            if src.rank == dst.rank:
                kind = "cpy" if op.kind is OpKind.COPY else "re"
                self._add((src.rank, 0, -1, op.channel), i, src.rank, (i, kind, s, d, cnt))
                continue
            receive = "r" if op.kind is OpKind.COPY else "rrc"
            self._add((src.rank, 1, dst.rank, op.channel), i, src.rank, (i, "s", s, d, cnt))
            self._add((dst.rank, 2, src.rank, op.channel), i, dst.rank, (i, receive, d, d, cnt))
        self.deps = [[int(d) for d in t.deps_of(i)] for i in range(t.n_ops)]

    def _add(self, tb: _Tb, op: int, rank: int, entry: tuple) -> None:  # type: ignore[type-arg]
        self.at[(op, rank)] = (tb, len(self.tbs[tb]))
        self.tbs[tb].append(entry)

    def gpu_lines(self, rank: int) -> list[str]:
        keys = sorted(k for k in self.tbs if k[0] == rank)
        tb_id = {k: n for n, k in enumerate(keys)}
        # waits of every entry: (tb, entry index) it waits for, on this gpu, outside its own tb
        waits: dict[tuple[_Tb, int], list[tuple[_Tb, int]]] = {}
        for key in keys:
            for index, (op, *_rest) in enumerate(self.tbs[key]):
                found = {self.at[(d, rank)] for d in self.deps[op] if (d, rank) in self.at}
                waits[(key, index)] = sorted(w for w in found if w[0] != key)
        # final step numbers once nops are inserted: one nop per wait beyond the first
        number: dict[tuple[_Tb, int], int] = {}
        for key in keys:
            s = 0
            for index in range(len(self.tbs[key])):
                s += max(0, len(waits[(key, index)]) - 1)
                number[(key, index)] = s
                s += 1
        waited = {w for ws in waits.values() for w in ws}
        lines = []
        for key in keys:
            _, role, peer, chan = key
            send, recv = (peer, -1) if role == 1 else (-1, peer) if role == 2 else (-1, -1)
            lines.append(f'    <tb id="{tb_id[key]}" send="{send}" recv="{recv}" chan="{chan}">')
            s = 0
            for index, (_op, kind, src, dst, cnt) in enumerate(self.tbs[key]):
                ws = [(tb_id[w[0]], number[w]) for w in waits[(key, index)]]
                for depid, deps in ws[:-1]:
                    lines.append(_step(s, "nop", ("i", -1), ("o", -1), 0, depid, deps, False))
                    s += 1
                depid, deps = ws[-1] if ws else (-1, -1)
                hasdep = (key, index) in waited
                lines.append(_step(s, kind, src, dst, cnt, depid, deps, hasdep))
                s += 1
            lines.append("    </tb>")
        return lines


def _step(s: int, kind: str, src: tuple[str, int], dst: tuple[str, int], cnt: int, depid: int,
          deps: int, hasdep: bool) -> str:  # fmt: skip
    return (
        f'      <step s="{s}" type="{kind}" srcbuf="{src[0]}" srcoff="{src[1]}" '
        f'dstbuf="{dst[0]}" dstoff="{dst[1]}" cnt="{cnt}" depid="{depid}" deps="{deps}" '
        f'hasdep="{int(hasdep)}"/>'
    )
