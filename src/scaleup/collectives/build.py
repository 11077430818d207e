"""A small builder for writing collective algorithms in a few lines.

Example: a 2-rank all_reduce that swaps halves (reduce-scatter, then all-gather)::

    >>> from scaleup.collectives.spec import CollectiveSpec
    >>> from scaleup.collectives.build import ScheduleBuilder
    >>> spec = CollectiveSpec("all_reduce", nranks=2, count=4)
    >>> b = ScheduleBuilder(spec, "halves")
    >>> for r in range(2):
    ...     _ = b.copy(b.input(r, 0, 4), b.output(r, 0, 4))          # start from my own data
    >>> for r in range(2):                                           # r owns half r
    ...     _ = b.reduce(b.input(1 - r, 2 * r, 2), b.output(r, 2 * r, 2))
    >>> for r in range(2):                                           # put my half to my peer
    ...     _ = b.copy(b.output(r, 2 * r, 2), b.output(1 - r, 2 * r, 2))
    >>> schedule = b.build()
    >>> schedule.n_ops
    6

Dependencies are inferred when ``deps`` is left out: an op depends on the earlier ops (in the order
they were added) that wrote a chunk it reads or writes, and on earlier readers of a chunk it
overwrites. Pass ``deps=[...]`` to state them yourself (then nothing is inferred for that op, but it
is still recorded so later inferred ops order after it). :meth:`ScheduleBuilder.add_batch` appends
many point-to-point ops at once from numpy columns, for algorithms at thousands of ranks; batch
ops carry explicit dependencies only.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from scaleup.collectives.schedule import Buffer, Chunk, OpKind, OpTable, Schedule
from scaleup.collectives.spec import CollectiveSpec
from scaleup.errors import ScheduleError

__all__ = ["ScheduleBuilder"]


class _AccessLog:
    """Per (rank, buffer): the accesses that later ops must order after (for inferred deps)."""

    def __init__(self) -> None:
        # (rank, buffer) -> list of [start, end, op_id, is_write]
        self._records: dict[tuple[int, int], list[tuple[int, int, int, bool]]] = defaultdict(list)

    def hazards(self, chunk: Chunk, *, write: bool) -> set[int]:
        lo, hi = chunk.offset, chunk.offset + chunk.count
        found = set()
        for start, end, op_id, was_write in self._records[(chunk.rank, int(chunk.buffer))]:
            if start < hi and lo < end and (write or was_write):
                found.add(op_id)
        return found

    def record(self, chunk: Chunk, op_id: int, *, write: bool) -> None:
        key = (chunk.rank, int(chunk.buffer))
        lo, hi = chunk.offset, chunk.offset + chunk.count
        if write:  # accesses wholly covered by this write are ordered through it from now on
            self._records[key] = [r for r in self._records[key] if not (lo <= r[0] and r[1] <= hi)]
        self._records[key].append((lo, hi, op_id, write))


class ScheduleBuilder:
    """Accumulates ops, then :meth:`build` returns an immutable :class:`Schedule`.

    Parameters
    ----------
    spec
        The collective the schedule claims to implement.
    algorithm
        The algorithm's name (``ring``, ``my-2d-ring``...).
    scratch_count
        Elements of scratch buffer per rank.
    params
        Algorithm parameters recorded on the schedule (shown by ``schedule show``).
    infer_deps
        Infer dependencies of ops added without ``deps`` (the default). ``False`` for generated
        algorithms that state every dependency: nothing is logged, which keeps building
        millions of ops cheap, and an op without ``deps`` is an error.
    """

    def __init__(
        self,
        spec: CollectiveSpec,
        algorithm: str,
        *,
        scratch_count: int = 0,
        params: Mapping[str, Any] | None = None,
        infer_deps: bool = True,
    ) -> None:
        self.spec = spec
        self.algorithm = algorithm
        self.scratch_count = scratch_count
        self.params = dict(params or {})
        self.infer_deps = infer_deps
        self._log = _AccessLog()
        self._columns: list[dict[str, np.ndarray]] = []
        self._pending: list[
            tuple[int, int, int, int, int, list[Chunk], list[Chunk], list[int]]
        ] = []
        self._n_ops = 0

    # ---- chunk helpers -----------------------------------------------------------------------
    def input(self, rank: int, offset: int, count: int) -> Chunk:
        return Chunk(rank, Buffer.INPUT, offset, count)

    def output(self, rank: int, offset: int, count: int) -> Chunk:
        return Chunk(rank, Buffer.OUTPUT, offset, count)

    def scratch(self, rank: int, offset: int, count: int) -> Chunk:
        return Chunk(rank, Buffer.SCRATCH, offset, count)

    @property
    def n_ops(self) -> int:
        return self._n_ops

    def hazards(self, srcs: Iterable[Chunk], dsts: Iterable[Chunk]) -> set[int]:
        """The earlier ops that an op reading ``srcs`` and writing ``dsts`` must order after:
        writers of what it reads or writes, readers of what it overwrites (what is inferred when
        ``deps`` is left out). Importers add these to the dependencies they state themselves."""
        found: set[int] = set()
        for chunk in srcs:
            found |= self._log.hazards(chunk, write=False)
        for chunk in dsts:
            found |= self._log.hazards(chunk, write=True)
        return found

    # ---- single ops --------------------------------------------------------------------------
    def copy(
        self,
        src: Chunk,
        dst: Chunk,
        *,
        rank: int | None = None,
        deps: Iterable[int] | None = None,
        channel: int = 0,
        step: int = 0,
    ) -> int:
        """``dst = src``; issued by ``rank`` (default: the source's rank, i.e. a put)."""
        return self._add(
            OpKind.COPY, src.rank if rank is None else rank, [src], [dst], deps, channel, step
        )

    def reduce(
        self,
        src: Chunk,
        dst: Chunk,
        *,
        rank: int | None = None,
        deps: Iterable[int] | None = None,
        channel: int = 0,
        step: int = 0,
    ) -> int:
        """``dst = dst (redop) src``; issued by ``rank`` (default: the destination's rank)."""
        return self._add(
            OpKind.REDUCE, dst.rank if rank is None else rank, [src], [dst], deps, channel, step
        )

    def switch_reduce(
        self,
        srcs: Sequence[Chunk],
        dsts: Sequence[Chunk],
        *,
        rank: int | None = None,
        deps: Iterable[int] | None = None,
        channel: int = 0,
        step: int = 0,
    ) -> int:
        """The switch reduces ``srcs`` and multicasts the result to every chunk of ``dsts``."""
        if not srcs or not dsts:
            raise ScheduleError("switch_reduce needs at least one source and one destination")
        issuer = srcs[0].rank if rank is None else rank
        return self._add(OpKind.SWITCH_REDUCE, issuer, list(srcs), list(dsts), deps, channel, step)

    def _add(
        self,
        kind: OpKind,
        rank: int,
        srcs: list[Chunk],
        dsts: list[Chunk],
        deps: Iterable[int] | None,
        channel: int,
        step: int,
    ) -> int:
        counts = {c.count for c in (*srcs, *dsts)}
        if len(counts) != 1:
            raise ScheduleError(
                f"chunks of one op must have one count, got {sorted(counts)}", op=self._n_ops
            )
        op_id = self._n_ops
        if deps is None and not self.infer_deps:
            raise ScheduleError("this builder does not infer dependencies: pass deps=", op=op_id)
        if deps is None:
            dep_list = sorted(self.hazards(srcs, dsts))
        else:
            dep_list = [int(d) for d in deps]
            bad = [d for d in dep_list if not 0 <= d < op_id]
            if bad:
                raise ScheduleError(
                    f"dependency on op {bad[0]}, which is not an earlier op", op=op_id
                )
        if self.infer_deps:
            for chunk in srcs:
                self._log.record(chunk, op_id, write=False)
            for chunk in dsts:
                self._log.record(chunk, op_id, write=True)
        self._pending.append((int(kind), rank, counts.pop(), channel, step, srcs, dsts, dep_list))
        self._n_ops += 1
        return op_id

    # ---- vectorised batches ------------------------------------------------------------------
    def add_batch(
        self,
        kind: OpKind | Any,
        *,
        src_rank: Any,
        src_buffer: Buffer | Any,
        src_offset: Any,
        dst_rank: Any,
        dst_buffer: Buffer | Any,
        dst_offset: Any,
        count: Any,
        deps: Any = None,
        rank: Any = None,
        channel: Any = 0,
        step: Any = 0,
    ) -> np.ndarray:
        """Append ``len(src_rank)`` copy or reduce ops at once; returns their ids.

        ``kind`` is one kind or one per op. Every column broadcasts against ``src_rank`` (and is
        not copied until :meth:`build`). ``deps`` is an (n, k) integer array of earlier op ids,
        ``-1`` meaning none. ``rank`` defaults to the source rank for copies and the destination
        rank for reductions.
        """
        self._flush()
        src = np.asarray(src_rank).ravel()
        n = len(src)
        kinds = np.broadcast_to(np.asarray(kind, dtype=np.int64), (n,))
        if np.any((kinds != int(OpKind.COPY)) & (kinds != int(OpKind.REDUCE))):
            raise ScheduleError("add_batch takes copy or reduce ops")
        dst = np.broadcast_to(np.asarray(dst_rank), (n,))
        if rank is None:
            rank = np.where(kinds == int(OpKind.COPY), src, dst)
        ids = np.arange(self._n_ops, self._n_ops + n, dtype=np.int64)
        if deps is None:
            dep_matrix = np.zeros((n, 0), dtype=np.int64)
        else:
            dep_matrix = np.asarray(deps, dtype=np.int64).reshape(n, -1)
            late = dep_matrix.max(axis=1, initial=-1) >= ids if dep_matrix.size else []
            if np.any(late) or (dep_matrix.size and dep_matrix.min() < -1):
                bad = int(np.flatnonzero(late)[0]) if np.any(late) else 0
                raise ScheduleError(
                    "batch dependency on an op that is not earlier", op=int(ids[bad])
                )
        valid = dep_matrix >= 0
        ones = np.broadcast_to(np.int64(1), (n,))
        values = {
            "kind": kinds, "rank": rank, "count": count, "channel": channel, "step": step,
            "n_src": ones, "src_rank": src, "src_buffer": src_buffer, "src_offset": src_offset,
            "n_dst": ones, "dst_rank": dst, "dst_buffer": dst_buffer, "dst_offset": dst_offset,
        }  # fmt: skip
        block = {k: np.broadcast_to(np.asarray(v), (n,)) for k, v in values.items()}
        block["n_dep"] = valid.sum(axis=1)
        block["dep_idx"] = dep_matrix[valid]
        self._columns.append(block)
        self._n_ops += n
        return ids

    def _flush(self) -> None:
        """Move single ops added so far into a column block."""
        if not self._pending:
            return
        p = self._pending
        srcs = [c for op in p for c in op[5]]
        dsts = [c for op in p for c in op[6]]
        self._columns.append({
            "kind": np.array([op[0] for op in p]), "rank": np.array([op[1] for op in p]),
            "count": np.array([op[2] for op in p]), "channel": np.array([op[3] for op in p]),
            "step": np.array([op[4] for op in p]),
            "n_src": np.array([len(op[5]) for op in p]),
            "src_rank": np.array([c.rank for c in srcs], dtype=np.int64),
            "src_buffer": np.array([int(c.buffer) for c in srcs], dtype=np.int64),
            "src_offset": np.array([c.offset for c in srcs], dtype=np.int64),
            "n_dst": np.array([len(op[6]) for op in p]),
            "dst_rank": np.array([c.rank for c in dsts], dtype=np.int64),
            "dst_buffer": np.array([int(c.buffer) for c in dsts], dtype=np.int64),
            "dst_offset": np.array([c.offset for c in dsts], dtype=np.int64),
            "n_dep": np.array([len(op[7]) for op in p]),
            "dep_idx": np.array([d for op in p for d in op[7]], dtype=np.int64),
        })  # fmt: skip
        self._pending = []

    def build(self) -> Schedule:
        """The immutable Schedule of every op added so far."""
        self._flush()
        dtypes = {
            "kind": np.int8, "rank": np.int32, "count": np.int64, "channel": np.int32,
            "step": np.int32, "n_src": np.int64, "src_rank": np.int32, "src_buffer": np.int8,
            "src_offset": np.int64, "n_dst": np.int64, "dst_rank": np.int32, "dst_buffer": np.int8,
            "dst_offset": np.int64, "n_dep": np.int64, "dep_idx": np.int64,
        }  # fmt: skip

        def column(name: str) -> np.ndarray:
            parts = [c[name] for c in self._columns]
            out = (np.concatenate(parts, dtype=dtypes[name], casting="unsafe") if parts
                   else np.zeros(0, dtype=dtypes[name]))  # fmt: skip
            out.flags.writeable = False  # handed to OpTable as is: no second copy
            return out

        def ptr(lengths: np.ndarray) -> np.ndarray:
            out = np.zeros(len(lengths) + 1, dtype=np.int64)
            np.cumsum(lengths, out=out[1:])
            out.flags.writeable = False
            return out

        cat = {name: column(name) for name in dtypes}
        table = OpTable(
            kind=cat["kind"], rank=cat["rank"], count=cat["count"], channel=cat["channel"],
            step=cat["step"], src_ptr=ptr(cat["n_src"]), src_rank=cat["src_rank"],
            src_buffer=cat["src_buffer"], src_offset=cat["src_offset"], dst_ptr=ptr(cat["n_dst"]),
            dst_rank=cat["dst_rank"], dst_buffer=cat["dst_buffer"], dst_offset=cat["dst_offset"],
            dep_ptr=ptr(cat["n_dep"]), dep_idx=cat["dep_idx"],
        )  # fmt: skip
        return Schedule(self.spec, self.algorithm, table, self.scratch_count, self.params)
