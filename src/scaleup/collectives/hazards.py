"""The verifier's hazard tracking: happens-before bitsets and per-buffer shadow maps.

Split from :mod:`scaleup.collectives.verify` (whose docstring states the rules: unwritten reads,
races, overlapping destinations) so that the replay state -- which op last wrote each element
range, which ops read it since, and each op's ancestors -- stands apart from the data replay and
the postcondition check.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Sequence

import numpy as np

from scaleup.collectives.schedule import Buffer, Chunk, OpTable, Schedule
from scaleup.errors import RaceError, UnwrittenReadError

__all__ = ["PRE", "UNWRITTEN", "Replay", "Shadow"]

PRE = -1  #: written by the precondition (input buffers)
UNWRITTEN = -2  #: never written (outputs and scratch at the start)


class Shadow:
    """Last writer and readers-since per element range of one (rank, buffer).

    The ranges are *atoms*: the buffer cut at every chunk end any op of the schedule names
    (:meth:`Replay.shadow` passes them), so a chunk is always a run of whole atoms, found by
    two dictionary lookups; nothing is split or merged during the replay. An end not among them
    (a caller outside the replay) is cut in, as before."""

    __slots__ = ("at", "pts", "readers", "writer")

    def __init__(self, size: int, initial: int, points: Sequence[int] = ()) -> None:
        self.pts = sorted({0, size, *points})
        self.at = {p: i for i, p in enumerate(self.pts)}
        self.writer = [initial] * (len(self.pts) - 1)
        #: readers since the last write, per atom (``()`` for none: no list until a read)
        self.readers: list[list[int] | tuple[()]] = [()] * (len(self.pts) - 1)

    def span(self, lo: int, hi: int) -> tuple[int, int]:
        """The atoms ``i:j`` covering elements ``lo:hi`` (``lo < hi``)."""
        at = self.at
        i, j = at.get(lo), at.get(hi)
        if i is None or j is None:
            return self._cut(lo, hi)
        return i, j

    def _cut(self, lo: int, hi: int) -> tuple[int, int]:
        """Cut the atoms at ``lo`` and ``hi`` (each inside an atom or an end) and re-index."""
        for x in (lo, hi):
            if x not in self.at:
                i = bisect_right(self.pts, x) - 1
                self.pts.insert(i + 1, x)
                self.writer.insert(i + 1, self.writer[i])
                self.readers.insert(i + 1, list(self.readers[i]))
                self.at = {p: k for k, p in enumerate(self.pts)}
        return self.at[lo], self.at[hi]

    def writer_at(self, x: int) -> int:
        return self.writer[bisect_right(self.pts, x) - 1]


class Replay:
    """Replays ops in topological order, with happens-before bitsets and shadow maps.

    :meth:`read` and :meth:`write` take a chunk as plain integers and build a
    :class:`~scaleup.collectives.schedule.Chunk` only to name it in an error: the verifier calls
    them for every operand of every op."""

    def __init__(self, schedule: Schedule, order: np.ndarray, in_place: bool = False) -> None:
        self.schedule = schedule
        self.in_place = in_place
        t = schedule.table
        pos = np.empty(t.n_ops, dtype=np.int64)
        pos[order] = np.arange(t.n_ops)
        self.pos: list[int] = pos.tolist()
        self.dep_ptr, self.dep_idx = t.dep_ptr.tolist(), t.dep_idx.tolist()
        self.remaining = np.bincount(t.dep_idx, minlength=t.n_ops).tolist() if t.n_ops else []
        self.anc: dict[int, int] = {}
        self.shadows: dict[int, Shadow] = {}
        self._n_buffers = len(Buffer)
        self._points = _chunk_ends(t, self._n_buffers, in_place)

    def shadow(self, rank: int, buffer: int) -> Shadow:
        if self.in_place and buffer == Buffer.OUTPUT:
            buffer = int(Buffer.INPUT)  # one buffer, one history
        key = rank * self._n_buffers + buffer
        found = self.shadows.get(key)
        if found is None:
            size = self.schedule.buffer_count(buffer)
            found = Shadow(
                size, PRE if buffer == Buffer.INPUT else UNWRITTEN, self._points.get(key, ())
            )
            self.shadows[key] = found
        return found

    def enter(self, op: int) -> int:
        """Compute ``op``'s ancestor bitset (by topological position); free finished deps."""
        bits = 0
        pos, anc, remaining = self.pos, self.anc, self.remaining
        for d in self.dep_idx[self.dep_ptr[op] : self.dep_ptr[op + 1]]:
            bits |= anc[d] | (1 << pos[d])
            remaining[d] -= 1
            if remaining[d] == 0:
                del anc[d]
        if remaining[op]:
            anc[op] = bits
        return bits

    def _race(self, first: int, second: int, what: str, chunk: Chunk) -> RaceError:
        aliased = ", output aliased to input" if self.in_place else ""
        return RaceError(
            f"op {first} and op {second} both touch {chunk} ({what}{aliased}) "
            "with no dependency path between them",
            op=second, rank=chunk.rank,
        )  # fmt: skip

    def read(
        self, sh: Shadow, op: int, bits: int, rank: int, buffer: int, offset: int, count: int
    ) -> None:
        """``op`` (ancestors ``bits``) reads ``count`` elements at ``offset`` of ``rank``'s
        ``buffer``, whose shadow is ``sh`` (:meth:`shadow`): each must have been written, by an
        op ordered before it."""
        lo, hi = sh.at.get(offset), sh.at.get(offset + count)
        if lo is None or hi is None:
            lo, hi = sh.span(offset, offset + count)
        writer, readers, pos = sh.writer, sh.readers, self.pos
        for seg in range(lo, hi):
            w = writer[seg]
            if w == UNWRITTEN:
                raise UnwrittenReadError(
                    f"op {op} reads {_chunk(rank, buffer, offset, count)}, but element "
                    f"{sh.pts[seg]} of it was never written before",
                    op=op, rank=rank,
                )  # fmt: skip
            if w >= 0 and w != op and not (bits >> pos[w]) & 1:
                chunk = _chunk(rank, buffer, offset, count)
                raise self._race(w, op, "a write and a read", chunk)
            seen = readers[seg]
            if not seen:
                readers[seg] = [op]
                continue
            if len(seen) > 16:
                seen[:] = [r for r in seen if not (bits >> pos[r]) & 1]
            seen.append(op)  # type: ignore[union-attr]

    def write(
        self, sh: Shadow, op: int, bits: int, rank: int, buffer: int, offset: int, count: int
    ) -> None:
        """``op`` (ancestors ``bits``) writes ``count`` elements at ``offset`` of ``rank``'s
        ``buffer``, whose shadow is ``sh``: their last writer and every reader since must be
        ordered before it."""
        lo, hi = sh.at.get(offset), sh.at.get(offset + count)
        if lo is None or hi is None:
            lo, hi = sh.span(offset, offset + count)
        writer, readers, pos = sh.writer, sh.readers, self.pos
        for seg in range(lo, hi):
            w = writer[seg]
            if w == op:
                raise RaceError(
                    f"op {op} writes {_chunk(rank, buffer, offset, count)} twice: its "
                    "destinations overlap",
                    op=op, rank=rank,
                )  # fmt: skip
            if w >= 0 and not (bits >> pos[w]) & 1:
                raise self._race(w, op, "two writes", _chunk(rank, buffer, offset, count))
            for r in readers[seg]:
                if r != op and not (bits >> pos[r]) & 1:
                    chunk = _chunk(rank, buffer, offset, count)
                    raise self._race(r, op, "a read and a write", chunk)
        if hi - lo == 1:
            writer[lo] = op
            readers[lo] = ()
        else:
            writer[lo:hi] = [op] * (hi - lo)
            readers[lo:hi] = [()] * (hi - lo)


def _chunk(rank: int, buffer: int, offset: int, count: int) -> Chunk:
    """The chunk an error names."""
    return Chunk(rank, Buffer(buffer), offset, count)


def _chunk_ends(t: OpTable, n_buffers: int, in_place: bool) -> dict[int, list[int]]:
    """Per shadow key (``rank * n_buffers + buffer``, an in-place output keyed as its input):
    every element index where a chunk of some op starts or ends, sorted (the shadows' atoms)."""
    count = t.count.astype(np.int64)
    keys, ends = [], []
    for ptr, rank, buf, off in (
        (t.src_ptr, t.src_rank, t.src_buffer, t.src_offset),
        (t.dst_ptr, t.dst_rank, t.dst_buffer, t.dst_offset),
    ):
        b = np.asarray(buf, dtype=np.int64)
        if in_place:
            b = np.where(b == int(Buffer.OUTPUT), int(Buffer.INPUT), b)
        key = np.asarray(rank, dtype=np.int64) * n_buffers + b
        start = np.asarray(off, dtype=np.int64)
        n = np.repeat(count, np.diff(ptr))
        keys += [key, key]
        ends += [start, start + n]
    key, end = np.concatenate(keys), np.concatenate(ends)
    if not len(key):
        return {}
    order = np.lexsort((end, key))
    key, end = key[order], end[order]
    new = np.r_[True, (key[1:] != key[:-1]) | (end[1:] != end[:-1])]
    key, end = key[new], end[new]
    cuts = np.flatnonzero(np.r_[True, key[1:] != key[:-1]]).tolist() + [len(key)]
    return {int(key[a]): end[a:b].tolist() for a, b in zip(cuts[:-1], cuts[1:], strict=True)}
