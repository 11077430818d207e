"""MSCCL XML -> :class:`~scaleup.collectives.schedule.Schedule`: what each step means as ops.

Sizes. ``count`` is the collective's (nccl-tests) count; a chunk is ``count / nchunksperloop``
elements (``count`` must divide evenly; the default, ``nchunksperloop``, makes a chunk one
element). For every collective the larger per-rank buffer holds ``nchunksperloop`` chunks, as
msccl-tools lays them out (all_gather's output, reduce_scatter's input, all_reduce's both).

Transfers. The k-th sending step of gpu ``g``'s tb with ``send=p`` on channel ``c`` is matched
with the k-th receiving step of gpu ``p``'s tb with ``recv=g`` on channel ``c`` (a connection
is a FIFO). Each matched pair becomes one scaleup op on channel tag ``c``: a ``copy`` when the
receiver's step is ``r`` or ``rcs``, a ``reduce`` when it is ``rrc``, ``rrs`` or ``rrcs``. The
data sent is the sender's ``src`` for ``s``, and what the sender's own receive produced for
``rcs``/``rrcs`` (its ``dst``) and ``rrs`` (a scratch slot scaleup adds, since MSCCL keeps that
value in registers). A receive-reduce whose local operand ``src`` is not its target first
copies ``src`` into the target (scaleup's ``reduce`` is ``dst = dst op src``), just in time as
scaleup's ring seeds its reductions: the k-th such copy of a tb waits for the reduce of the
(k-2)-th (the second for the first copy), and for every op that touches what it reads or
writes. ``cpy`` and ``re`` are local ``copy`` and ``reduce`` ops; ``nop`` only waits.

Dependencies. A step waits for the previous step of its tb and for its ``depid``/``deps`` step;
a transfer also waits for the data at the sender. MSCCL's sends are buffered (the sender may
reuse its chunk at once), scaleup's transfer reads the chunk when it runs: so a later write to a
chunk a transfer sends is ordered after that transfer. Steps whose waits form a cycle cannot run
(a deadlock) and are refused. ``proto`` becomes ``params["protocol"]``; an XML written for
in-place use only (``inplace="1"`` without ``outofplace="1"``) sets ``params["in_place"]``,
and is verified with the output aliased to the input.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass, field

from scaleup.collectives.build import ScheduleBuilder
from scaleup.collectives.msccl_xml import (
    RECEIVES,
    SENDS,
    MscclAlgo,
    MscclStep,
    parse_msccl_xml,
)
from scaleup.collectives.schedule import Buffer, Chunk, OpKind, Schedule
from scaleup.collectives.spec import BLOCKED_COLLECTIVES, CollectiveSpec
from scaleup.errors import MscclFileError, UsageError

__all__ = ["schedule_from_msccl", "schedule_from_msccl_xml"]

_BUFFERS = {"i": Buffer.INPUT, "o": Buffer.OUTPUT, "s": Buffer.SCRATCH}
_REDUCING = frozenset({"rrc", "rrs", "rrcs"})


@dataclass
class _Node:
    """One op to emit (``kind`` None: a wait that emits nothing), with what it waits for."""

    where: str
    kind: OpKind | None = None
    src: Chunk | None = None
    dst: Chunk | None = None
    channel: int = 0
    step: int = 0
    deps: set[int] = field(default_factory=set)
    init: bool = False  # seeds a receive-reduce: emitted deps are ``pace`` and its hazards
    pace: set[int] = field(default_factory=set)


def schedule_from_msccl_xml(
    text: str, *, source: str = "schedule.xml", count: int | None = None
) -> Schedule:
    """Parse MSCCL XML and build the Schedule (see the module docstring for the mapping)."""
    return schedule_from_msccl(parse_msccl_xml(text, source=source), source=source, count=count)


def schedule_from_msccl(
    algo: MscclAlgo, *, source: str = "schedule.xml", count: int | None = None
) -> Schedule:
    """The Schedule of a parsed MSCCL algorithm at ``count`` elements (default nchunksperloop)."""
    return _Lowering(algo, source, algo.nchunksperloop if count is None else count).build()


class _Lowering:
    """Turns steps into nodes, matches sends with receives, orders and emits the ops."""

    def __init__(self, algo: MscclAlgo, source: str, count: int) -> None:
        self.algo, self.source = algo, source
        k = algo.nchunksperloop
        if count <= 0 or count % k or (algo.coll in BLOCKED_COLLECTIVES and count % algo.ngpus):
            blocked = f" and of ngpus={algo.ngpus}" if algo.coll in BLOCKED_COLLECTIVES else ""
            raise UsageError(
                f"count {count} must be a positive multiple of nchunksperloop={k}{blocked}",
                source="count",
            )
        self.spec = CollectiveSpec(algo.coll, nranks=algo.ngpus, count=count)
        self.chunk = count // k
        s_chunks = max(g.s_chunks for g in algo.gpus)
        self.temp_next = [s_chunks] * algo.ngpus  # rrs values, after the file's scratch
        self.nodes: list[_Node] = []
        self.done: dict[tuple[int, int, int], int] = {}  # (gpu, tb index, step) -> node
        self.wait: dict[tuple[int, int, int], int] = {}  # ... -> node standing for "ready"
        self._cross: list[tuple[int, tuple[int, int, int]]] = []
        self.seeded: dict[tuple[int, int], list[tuple[int, int]]] = {}  # tb -> [(init, recv)]
        self.value: dict[tuple[int, int, int], tuple[Chunk, set[int]]] = {}
        self.target: dict[tuple[int, int, int], tuple[Chunk, set[int]]] = {}

    def fail(self, message: str, where: str) -> MscclFileError:
        return MscclFileError(message, source=self.source, entry=where)

    def _chunk(self, gpu: int, buf: str, offset: int, cnt: int, where: str) -> Chunk:
        buffer = _BUFFERS[buf]
        size = (self.temp_next[gpu] * self.chunk if buffer is Buffer.SCRATCH else
                (self.spec.input_count, self.spec.output_count)[int(buffer)])  # fmt: skip
        if (offset + cnt) * self.chunk > size:
            raise self.fail(
                f"{buf}[{offset}:{offset + cnt}] is past the {size // self.chunk} chunks of "
                f"buffer {buf}",
                where,
            )
        return Chunk(gpu, buffer, offset * self.chunk, cnt * self.chunk)

    def _node(self, node: _Node) -> int:
        self.nodes.append(node)
        return len(self.nodes) - 1

    # ---- phase 1: every step's own nodes -----------------------------------------------------
    def _steps(self) -> None:
        for gpu in self.algo.gpus:
            index = {tb.id: i for i, tb in enumerate(gpu.tbs)}
            for t, tb in enumerate(gpu.tbs):
                for step in tb.steps:
                    where = f"gpu {gpu.id} tb {tb.id} step {step.s}"
                    ready = {self.done[(gpu.id, t, step.s - 1)]} if step.s else set()
                    wait = self._node(_Node(where, deps=ready))  # stands for "ready"
                    if step.depid >= 0:
                        self._cross.append((wait, (gpu.id, index[step.depid], step.deps)))
                    key = (gpu.id, t, step.s)
                    self.wait[key] = wait
                    self.done[key] = self._own(gpu.id, tb.chan, step, key, wait, where)

    def _own(self, gpu: int, chan: int, step: MscclStep, key: tuple[int, int, int], wait: int,
             where: str) -> int:  # fmt: skip
        """Add the step's local nodes; returns the node that stands for 'this step is done'."""
        ready = {wait}
        if step.type in ("cpy", "re"):
            src = self._chunk(gpu, step.srcbuf, step.srcoff, step.cnt, where)
            dst = self._chunk(gpu, step.dstbuf, step.dstoff, step.cnt, where)
            kind = OpKind.COPY if step.type == "cpy" else OpKind.REDUCE
            return self._node(_Node(where, kind, src, dst, chan, step.s, ready))
        if step.type == "s":
            src = self._chunk(gpu, step.srcbuf, step.srcoff, step.cnt, where)
            self.value[key] = (src, ready)
            return wait
        if step.type not in RECEIVES:  # nop
            return wait
        if step.type == "rrs":
            start = self.temp_next[gpu]
            self.temp_next[gpu] += step.cnt
            target = self._chunk(gpu, "s", start, step.cnt, where)
        else:
            target = self._chunk(gpu, step.dstbuf, step.dstoff, step.cnt, where)
        needs = set(ready)
        if step.type in _REDUCING:
            src = self._chunk(gpu, step.srcbuf, step.srcoff, step.cnt, where)
            if src != target:
                earlier = self.seeded.setdefault(key[:2], [])
                pace = ({earlier[-2][1]} if len(earlier) > 1 else  # reduce of seeded step k-2
                        {earlier[-1][0]} if earlier else set())  # fmt: skip
                init = _Node(where, OpKind.COPY, src, target, chan, step.s, ready, True, pace)
                needs.add(self._node(init))
        self.target[key] = (target, needs)
        recv = self._node(_Node(where, channel=chan, step=step.s))  # filled in by matching
        if step.type in _REDUCING and len(needs) > 1:
            self.seeded[key[:2]].append((max(needs), recv))
        if step.type in SENDS:
            self.value[key] = (target, {recv})
        return recv

    # ---- phase 2: match sends with receives --------------------------------------------------
    def _match(self) -> None:
        sends: dict[tuple[int, int, int], list[tuple[int, int, int]]] = {}
        recvs: dict[tuple[int, int, int], list[tuple[int, int, int]]] = {}
        for gpu in self.algo.gpus:
            for t, tb in enumerate(gpu.tbs):
                for step in tb.steps:
                    for kinds, peer, table, conn in (
                        (SENDS, tb.send, sends, (gpu.id, tb.send, tb.chan)),
                        (RECEIVES, tb.recv, recvs, (tb.recv, gpu.id, tb.chan)),
                    ):
                        if step.type in kinds and peer >= 0:
                            table.setdefault(conn, []).append((gpu.id, t, step.s))
        for conn in sorted(set(sends) | set(recvs)):
            out, into = sends.get(conn, []), recvs.get(conn, [])
            if len(out) != len(into):
                g, p, c = conn
                raise self.fail(
                    f"gpu {g} sends {len(out)} times to gpu {p} on channel {c} but gpu {p} "
                    f"receives {len(into)} times from gpu {g}",
                    f"gpu {g}",
                )
            for s_key, r_key in zip(out, into, strict=True):
                self._transfer(s_key, r_key)

    def _transfer(self, s_key: tuple[int, int, int], r_key: tuple[int, int, int]) -> None:
        value, value_deps = self.value[s_key]
        target, target_deps = self.target[r_key]
        node = self.nodes[self.done[r_key]]
        if value.count != target.count:
            raise self.fail(
                f"receives cnt={target.count // self.chunk} but the matching send (gpu "
                f"{s_key[0]} step {s_key[2]}) sends cnt={value.count // self.chunk}",
                node.where,
            )
        receive = self._step_type(r_key)
        node.kind = OpKind.REDUCE if receive in _REDUCING else OpKind.COPY
        node.src, node.dst = value, target
        node.deps = value_deps | target_deps

    def _step_type(self, key: tuple[int, int, int]) -> str:
        gpu, t, s = key
        return self.algo.gpus[gpu].tbs[t].steps[s].type

    # ---- phase 3: order and emit -------------------------------------------------------------
    def build(self) -> Schedule:
        self._steps()
        for wait, key in self._cross:
            self.nodes[wait].deps.add(self.done[key])
        self._match()
        order = self._order()
        b = ScheduleBuilder(
            self.spec,
            f"msccl:{self.algo.name}",
            scratch_count=max(self.temp_next) * self.chunk,
            params={"protocol": self.algo.proto, "in_place": self.algo.inplace,
                    "nchunksperloop": self.algo.nchunksperloop},
        )  # fmt: skip
        emitted: list[set[int]] = [set() for _ in self.nodes]  # node -> op ids it stands for
        sent_from: dict[int, set[int]] = {}  # rank -> transfers reading its chunks
        for i in order:
            node = self.nodes[i]
            deps = set().union(*(emitted[d] for d in node.deps)) if node.deps else set()
            if node.kind is None or node.src is None or node.dst is None:
                emitted[i] = deps
                continue
            if node.init:
                deps = set().union(*(emitted[d] for d in node.pace)) if node.pace else set()
                deps |= b.hazards([node.src], [node.dst])
            else:
                deps |= b.hazards([], [node.dst]) & sent_from.get(node.dst.rank, set())
            add = b.copy if node.kind is OpKind.COPY else b.reduce
            op = add(node.src, node.dst, deps=sorted(deps), channel=node.channel, step=node.step)
            if node.src.rank != node.dst.rank:
                sent_from.setdefault(node.src.rank, set()).add(op)
            emitted[i] = {op}
        return b.build()

    def _order(self) -> list[int]:
        """A topological order of the nodes (earliest file position first); cycles refused."""
        users: list[list[int]] = [[] for _ in self.nodes]
        missing = [len(n.deps) for n in self.nodes]
        for i, node in enumerate(self.nodes):
            for d in node.deps:
                users[d].append(i)
        ready = [i for i, m in enumerate(missing) if m == 0]
        heapq.heapify(ready)
        order = []
        while ready:
            i = heapq.heappop(ready)
            order.append(i)
            for u in users[i]:
                missing[u] -= 1
                if missing[u] == 0:
                    heapq.heappush(ready, u)
        if len(order) < len(self.nodes):
            stuck = next(i for i, m in enumerate(missing) if m)
            raise self.fail(
                "the steps wait for each other in a cycle (the schedule would deadlock)",
                self.nodes[stuck].where,
            )
        return order
