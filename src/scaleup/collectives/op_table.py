"""The Schedule IR's rows: buffers, op kinds, chunks, ops and their columnar table.

Split from :mod:`scaleup.collectives.schedule` (which re-exports these names and documents what
each op means) so that the storage -- read-only numpy columns with CSR lists for sources,
destinations and dependencies, and the lazy :class:`Op` view over them -- stands apart from the
:class:`~scaleup.collectives.schedule.Schedule` that validates, measures and serialises it.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from enum import IntEnum
from typing import Any, overload

import numpy as np

from scaleup.arrays import unique
from scaleup.errors import ScheduleError

__all__ = [
    "Buffer",
    "Chunk",
    "Op",
    "OpKind",
    "OpTable",
    "OpsView",
    "csr_rows",
    "csr_rows_lengths",
    "csr_sort_order",
]


class _Labelled(IntEnum):
    """An integer code (as stored in the op table) with a lower-case name for printing."""

    @property
    def label(self) -> str:
        return self.name.lower()


class Buffer(_Labelled):
    """The per-rank buffers a chunk can live in."""

    INPUT = 0
    OUTPUT = 1
    SCRATCH = 2


class OpKind(_Labelled):
    """What an op does (see the module docstring)."""

    COPY = 0
    REDUCE = 1
    SWITCH_REDUCE = 2


@dataclass(frozen=True, slots=True)
class Chunk:
    """``count`` elements at ``offset`` of one rank's buffer."""

    rank: int
    buffer: Buffer
    offset: int
    count: int

    def __str__(self) -> str:
        return f"r{self.rank}.{Buffer(self.buffer).label}[{self.offset}:{self.offset + self.count}]"


@dataclass(frozen=True, slots=True)
class Op:
    """One operation of a schedule (a row of its :class:`OpTable`)."""

    id: int
    kind: OpKind
    rank: int
    srcs: tuple[Chunk, ...]
    dsts: tuple[Chunk, ...]
    deps: tuple[int, ...] = ()
    channel: int = 0
    step: int = 0

    @property
    def count(self) -> int:
        """Elements moved (every chunk of an op has the same count)."""
        return self.dsts[0].count if self.dsts else 0

    def __str__(self) -> str:
        srcs = ", ".join(map(str, self.srcs))
        dsts = ", ".join(map(str, self.dsts))
        deps = ",".join(map(str, self.deps)) or "-"
        return (
            f"op {self.id:>5} {OpKind(self.kind).label:<13} by r{self.rank:<3} "
            f"{srcs} -> {dsts}  deps {deps}  ch{self.channel} step {self.step}"
        )


def _frozen(array: Any, dtype: Any) -> np.ndarray:
    out = np.ascontiguousarray(array, dtype=dtype)
    if out.base is not None or out.flags.writeable:
        out = out.copy()
    out.flags.writeable = False
    return out


@dataclass(frozen=True, eq=False)
class OpTable:
    """Columnar storage of a schedule's ops; every array is read-only.

    Row ``i`` is op ``i``. Sources of op ``i`` are rows ``src_ptr[i]:src_ptr[i+1]`` of the
    ``src_*`` arrays (CSR), likewise destinations and dependencies.
    """

    kind: np.ndarray  # int8
    rank: np.ndarray  # int32
    count: np.ndarray  # int64, elements
    channel: np.ndarray  # int32
    step: np.ndarray  # int32
    src_ptr: np.ndarray  # int64, n_ops + 1
    src_rank: np.ndarray  # int32
    src_buffer: np.ndarray  # int8
    src_offset: np.ndarray  # int64
    dst_ptr: np.ndarray
    dst_rank: np.ndarray
    dst_buffer: np.ndarray
    dst_offset: np.ndarray
    dep_ptr: np.ndarray  # int64, n_ops + 1
    dep_idx: np.ndarray  # int64

    def __post_init__(self) -> None:
        types = {
            "kind": np.int8, "rank": np.int32, "count": np.int64, "channel": np.int32,
            "step": np.int32, "src_ptr": np.int64, "src_rank": np.int32, "src_buffer": np.int8,
            "src_offset": np.int64, "dst_ptr": np.int64, "dst_rank": np.int32,
            "dst_buffer": np.int8, "dst_offset": np.int64, "dep_ptr": np.int64,
            "dep_idx": np.int64,
        }  # fmt: skip
        for name, dtype in types.items():
            object.__setattr__(self, name, _frozen(getattr(self, name), dtype))
        n = len(self.kind)
        for name in ("rank", "count", "channel", "step"):
            if len(getattr(self, name)) != n:
                raise ScheduleError(
                    f"op table column {name!r} has {len(getattr(self, name))} rows, want {n}"
                )
        for prefix, length in (
            ("src", len(self.src_rank)),
            ("dst", len(self.dst_rank)),
            ("dep", len(self.dep_idx)),
        ):
            ptr = getattr(self, f"{prefix}_ptr")
            if (
                len(ptr) != n + 1
                or (n + 1 and (ptr[0] != 0 or ptr[-1] != length))
                or np.any(np.diff(ptr) < 0)
            ):
                raise ScheduleError(f"op table {prefix}_ptr is not a valid CSR index")

    @property
    def n_ops(self) -> int:
        return len(self.kind)

    @property
    def n_srcs(self) -> np.ndarray:
        """Sources per op."""
        return np.diff(self.src_ptr)

    @property
    def n_dsts(self) -> np.ndarray:
        """Destinations per op."""
        return np.diff(self.dst_ptr)

    @property
    def n_deps(self) -> np.ndarray:
        """Dependencies per op."""
        return np.diff(self.dep_ptr)

    def deps_of(self, i: int) -> np.ndarray:
        return self.dep_idx[self.dep_ptr[i] : self.dep_ptr[i + 1]]

    def srcs_of(self, i: int) -> tuple[Chunk, ...]:
        return self._chunks(i, self.src_ptr, self.src_rank, self.src_buffer, self.src_offset)

    def dsts_of(self, i: int) -> tuple[Chunk, ...]:
        return self._chunks(i, self.dst_ptr, self.dst_rank, self.dst_buffer, self.dst_offset)

    def _chunks(
        self, i: int, ptr: np.ndarray, rank: np.ndarray, buffer: np.ndarray, offset: np.ndarray
    ) -> tuple[Chunk, ...]:
        """Op ``i``'s chunks from one CSR list (sources or destinations)."""
        c = int(self.count[i])
        return tuple(
            Chunk(int(rank[j]), Buffer(int(buffer[j])), int(offset[j]), c)
            for j in range(int(ptr[i]), int(ptr[i + 1]))
        )

    def op(self, i: int) -> Op:
        return Op(
            id=i,
            kind=OpKind(int(self.kind[i])),
            rank=int(self.rank[i]),
            srcs=self.srcs_of(i),
            dsts=self.dsts_of(i),
            deps=tuple(int(d) for d in self.deps_of(i)),
            channel=int(self.channel[i]),
            step=int(self.step[i]),
        )

    @classmethod
    def from_ops(cls, ops: Sequence[Op]) -> OpTable:
        """Build the columns from Op objects (their ids must be 0..n-1 in order)."""
        for position, op in enumerate(ops):
            if op.id != position:
                raise ScheduleError(
                    f"op ids must be 0..n-1 in order; position {position} has id {op.id}", op=op.id
                )
        srcs = [c for op in ops for c in op.srcs]
        dsts = [c for op in ops for c in op.dsts]
        deps = [d for op in ops for d in op.deps]
        counts = []
        for op in ops:
            chunk_counts = {c.count for c in (*op.srcs, *op.dsts)}
            if len(chunk_counts) > 1:
                raise ScheduleError(
                    f"chunks of one op must have one count, got {sorted(chunk_counts)}", op=op.id
                )
            counts.append(chunk_counts.pop() if chunk_counts else 0)
        return cls(
            kind=np.array([int(op.kind) for op in ops], dtype=np.int8),
            rank=np.array([op.rank for op in ops], dtype=np.int32),
            count=np.array(counts, dtype=np.int64),
            channel=np.array([op.channel for op in ops], dtype=np.int32),
            step=np.array([op.step for op in ops], dtype=np.int32),
            src_ptr=np.concatenate([[0], np.cumsum([len(op.srcs) for op in ops], dtype=np.int64)]),
            src_rank=np.array([c.rank for c in srcs], dtype=np.int32),
            src_buffer=np.array([int(c.buffer) for c in srcs], dtype=np.int8),
            src_offset=np.array([c.offset for c in srcs], dtype=np.int64),
            dst_ptr=np.concatenate([[0], np.cumsum([len(op.dsts) for op in ops], dtype=np.int64)]),
            dst_rank=np.array([c.rank for c in dsts], dtype=np.int32),
            dst_buffer=np.array([int(c.buffer) for c in dsts], dtype=np.int8),
            dst_offset=np.array([c.offset for c in dsts], dtype=np.int64),
            dep_ptr=np.concatenate([[0], np.cumsum([len(op.deps) for op in ops], dtype=np.int64)]),
            dep_idx=np.asarray(deps, dtype=np.int64),
        )


class OpsView(Sequence[Op]):
    """A lazy, read-only sequence of :class:`Op` over an :class:`OpTable`."""

    def __init__(self, table: OpTable) -> None:
        self._table = table

    def __len__(self) -> int:
        return self._table.n_ops

    @overload
    def __getitem__(self, index: int) -> Op: ...
    @overload
    def __getitem__(self, index: slice) -> list[Op]: ...
    def __getitem__(self, index: int | slice) -> Op | list[Op]:
        if isinstance(index, slice):
            return [self._table.op(i) for i in range(*index.indices(len(self)))]
        n = len(self)
        if not -n <= index < n:
            raise IndexError(index)
        return self._table.op(index % n)

    def __iter__(self) -> Iterator[Op]:
        return (self._table.op(i) for i in range(len(self)))


def csr_rows(ptr: np.ndarray, ops: np.ndarray) -> np.ndarray:
    """Row indices of the CSR lists of ``ops``, concatenated."""
    return csr_rows_lengths(ptr, ops)[0]


def csr_rows_lengths(ptr: np.ndarray, ops: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """:func:`csr_rows` and the length of every op's list (the simulator's hot path wants
    both, for the owner of every row)."""
    begin = ptr[ops]
    lengths = ptr[ops + 1] - begin
    ends = np.cumsum(lengths)
    total = int(ends[-1]) if len(ends) else 0
    if not total:
        return np.zeros(0, dtype=np.int64), lengths
    return np.repeat(begin - (ends - lengths), lengths) + np.arange(total), lengths


def csr_sort_order(lengths: np.ndarray, key: np.ndarray) -> np.ndarray:
    """The entry order that sorts every row's entries by ``key``, stably, rows staying in place
    (rows of ``lengths`` consecutive entries): ``np.lexsort((key, row_of_entry))``, as short
    sorts of the rows of one length side by side instead of one sort of every entry."""
    starts = np.concatenate([[0], np.cumsum(lengths)])[:-1].astype(np.int64)
    order = np.arange(len(key))
    for size in unique(lengths[lengths > 1]).tolist():
        at = starts[lengths == size][:, None] + np.arange(size)
        order[at] = np.take_along_axis(at, np.argsort(key[at], axis=1, kind="stable"), axis=1)
    return order
