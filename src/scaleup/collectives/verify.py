"""The verifier: replay a Schedule on numpy buffers and check what its collective promises.

``verify(schedule)`` runs four checks and raises the first failure (a
:class:`~scaleup.errors.ScheduleError` subclass naming the op):

1. **Bounds** (:class:`~scaleup.errors.BoundsError`): every chunk lies inside its buffer.
2. **Cycles** (:class:`~scaleup.errors.CycleError`): the dependency graph is a DAG; the error
   lists the ops of one cycle.
3. **Replay** in a topological order of the DAG, on buffers whose inputs come from
   ``spec.make_inputs`` and whose outputs and scratch start poisoned (NaN, or the most negative
   integer) and *unwritten*. A shadow map per (rank, buffer) keeps, for every element range, the
   op that last wrote it and the ops that read it since:

   - reading an element nothing wrote (and that is not input) is an
     :class:`~scaleup.errors.UnwrittenReadError`;
   - a write (or a read) of an element whose last writer is not *ordered before* it, or a write
     of an element read since by an op not ordered before it, is a
     :class:`~scaleup.errors.RaceError` naming both ops; so is an op whose destinations overlap
     each other.

   Each op does what :mod:`scaleup.collectives.semantics` defines (read every operand, then
   write), through :func:`~scaleup.collectives.semantics.apply_op`, the function the runtime's
   transports execute with.

   *Ordered before* is happens-before in the DAG, exact: each op carries the set of its
   ancestors as a Python-int bitset (freed once all its dependants are replayed, so memory is
   about DAG width x ops / 8 bytes). The check is complete in the FastTrack sense: if any two ops
   touch one element, at least one writing, without a path between them, ``verify`` raises a
   RaceError (possibly naming an earlier racing pair than the one you had in mind); it never
   reports a race that is not there. Because replay follows a topological order, the values seen
   are those of *every* legal execution once no race is reported.
4. **Postcondition** (:class:`~scaleup.errors.PostconditionError`): every output element the
   spec defines was written and equals ``spec.reference``; the error names rank, buffer, first
   bad index and the last op that wrote it.

In place (``in_place=True``): every rank's output buffer *is* its input buffer, as when the
runtime runs ``all_reduce(x)`` on ``x`` itself. Shadow maps and data are shared, so checks 2-3
see every hazard the aliasing creates (an op overwriting input a peer has yet to read is a
RaceError), and an op whose destination is one of its own sources still reads before it
writes. A rank whose output the spec leaves undefined (reduce's non-roots) must end with its
input unchanged: the buffer is the caller's. Only for collectives whose input and output have
one size (all_reduce, broadcast, reduce, all_to_all, send_recv).

Tolerance. Integer dtypes and non-reducing collectives (and max/min) must match exactly. For
float sum and prod the algorithm may reduce in any order, so every element must satisfy
``|out - ref| <= 2 (n + 1) eps S`` where ``ref`` is ``spec.reference`` (rank-order reduction in
the dtype), ``S`` the sum (prod) over ranks of each rank's largest ``|x|`` and ``eps`` the dtype's
machine epsilon (float16 9.8e-4, bfloat16 7.8e-3, float32 1.2e-7): the classic ``(n-1) eps
sum|x|`` bound on reordered summation, for both results, so it grows with the world size.
(``make_inputs`` uses multiples of 1/8, so sums of up to ~16 ranks are exact even in float16.)

Cost: one numpy slice operation and a few bisects per op; a 64-rank ring all_reduce of 1M
float32 elements (8k ops) verifies in a fraction of a second (``bench/bench_verify.py``).

The hazard tracking (shadow maps, happens-before) lives in :mod:`~scaleup.collectives.hazards`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from scaleup.collectives.hazards import UNWRITTEN, Replay
from scaleup.collectives.schedule import Buffer, Chunk, OpKind, Schedule
from scaleup.collectives.semantics import apply_op
from scaleup.collectives.spec import CollectiveSpec, numpy_dtype, reduce_ufunc
from scaleup.errors import (
    BoundsError,
    CycleError,
    PostconditionError,
    UsageError,
)  # fmt: skip
from scaleup.limits import BYTES_PER_OP, check_memory

__all__ = ["VerifyReport", "float_tolerance", "topological_order", "verify"]


@dataclass(frozen=True)
class VerifyReport:
    """What a successful :func:`verify` checked."""

    algorithm: str
    spec: str
    dtype: str
    n_ops: int
    n_steps: int
    ranks_checked: int
    max_abs_error: float
    tolerance: str
    in_place: bool = False

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)

    def __str__(self) -> str:
        aliased = ", output aliased to input" if self.in_place else ""
        return (
            f"{self.algorithm} {self.spec} {self.dtype}{aliased}: {self.n_ops} ops, "
            f"{self.n_steps} steps, "
            f"postcondition holds on {self.ranks_checked} ranks "
            f"(max abs error {self.max_abs_error:g}, "
            f"{self.tolerance})"
        )


def _eps(dtype: np.dtype) -> float:
    try:
        return float(np.finfo(dtype).eps)
    except ValueError:  # bfloat16 from ml_dtypes
        import ml_dtypes  # type: ignore[import-not-found]

        return float(ml_dtypes.finfo(dtype).eps)


def float_tolerance(nranks: int, dtype: str | np.dtype) -> str:
    """The float tolerance rule of :func:`verify`, as text (for reports and docs)."""
    dt = numpy_dtype(dtype) if isinstance(dtype, str) else np.dtype(dtype)
    if dt.kind != "f" and dt.name != "bfloat16":
        return "exact"
    return f"|err| <= 2*({nranks}+1)*eps*sum(max|x|), eps={_eps(dt):.3g}"


def topological_order(schedule: Schedule) -> np.ndarray:
    """Op ids in an order where every op follows its dependencies; CycleError if there is none."""
    t = schedule.table
    n = t.n_ops
    owner = np.repeat(np.arange(n), t.n_deps)
    if not len(t.dep_idx) or bool(np.all(t.dep_idx < owner)):
        return np.arange(n)
    deps = [t.dep_idx[t.dep_ptr[i] : t.dep_ptr[i + 1]].tolist() for i in range(n)]
    indegree = [len(d) for d in deps]
    dependants: list[list[int]] = [[] for _ in range(n)]
    for i, ds in enumerate(deps):
        for d in ds:
            dependants[d].append(i)
    ready = [i for i in range(n) if indegree[i] == 0]
    order: list[int] = []
    while ready:
        i = ready.pop()
        order.append(i)
        for j in dependants[i]:
            indegree[j] -= 1
            if indegree[j] == 0:
                ready.append(j)
    if len(order) < n:
        done = set(order)
        node = next(i for i in range(n) if i not in done)
        seen: dict[int, int] = {}
        path: list[int] = []
        while node not in seen:
            seen[node] = len(path)
            path.append(node)
            node = next(d for d in deps[node] if d not in done)
        cycle = path[seen[node] :]
        text = " -> ".join(f"op {c}" for c in [*cycle, cycle[0]])
        raise CycleError(f"dependency cycle: {text} (each depends on the next)", op=cycle[0])
    return np.asarray(order, dtype=np.int64)


def _check_bounds(schedule: Schedule) -> None:
    t = schedule.table
    sizes = np.array([schedule.buffer_count(b) for b in Buffer], dtype=np.int64)
    for prefix in ("src", "dst"):
        ptr = getattr(t, f"{prefix}_ptr")
        buffers, offsets = getattr(t, f"{prefix}_buffer"), getattr(t, f"{prefix}_offset")
        rows_op = np.repeat(np.arange(t.n_ops), np.diff(ptr))
        counts = t.count[rows_op]
        bad = np.flatnonzero((offsets < 0) | (offsets + counts > sizes[buffers.astype(np.int64)]))
        if len(bad):
            row, op = int(bad[0]), int(rows_op[bad[0]])
            buffer = Buffer(int(buffers[row]))
            chunk = Chunk(
                int(getattr(t, f"{prefix}_rank")[row]), buffer, int(offsets[row]), int(counts[row])
            )
            raise BoundsError(
                f"op {op}: chunk {chunk} lies outside {buffer.label} "
                f"({sizes[int(buffer)]} elements)",
                op=op, rank=chunk.rank,
            )  # fmt: skip


@np.errstate(over="ignore", invalid="ignore")  # an overflowing float16 prod is compared, not warned
def verify(
    schedule: Schedule, dtype: str = "float32", *, seed: int = 0, in_place: bool = False
) -> VerifyReport:
    """Replay ``schedule`` on numpy buffers and check its collective's postcondition.

    Parameters
    ----------
    schedule
        Any Schedule (from an algorithm, the builder or JSON).
    dtype
        Element type of the buffers (``int32``, ``float16``, ``float32``, ...).
    seed
        Seed of the rank-distinct input data.
    in_place
        Replay with every rank's output buffer aliased to its input buffer (see the module
        docstring); UsageError for a collective whose input and output differ in size.

    Returns
    -------
    VerifyReport
        What was checked; only returned when everything holds.

    Raises
    ------
    BoundsError, CycleError, UnwrittenReadError, RaceError, PostconditionError
        The first problem found, naming the op (and rank, chunk, index).
    UsageError
        ``in_place`` for a collective whose input and output differ in size; a negative seed.
    LimitError
        Buffers larger than this machine's free memory.

    Examples
    --------
    >>> from scaleup.collectives.algorithms import build_schedule
    >>> from scaleup.collectives.spec import CollectiveSpec
    >>> verify(build_schedule("ring", CollectiveSpec("all_reduce", 4, 10))).n_ops
    36
    """
    spec = schedule.spec
    np_dtype = numpy_dtype(dtype)
    _check_arguments(spec, seed, in_place)
    check_memory(_replay_bytes(schedule, np_dtype.itemsize), what="the replay", source="count")
    _check_bounds(schedule)
    order = topological_order(schedule)
    inputs = spec.make_inputs(np_dtype, seed=seed)
    expected = _expected(spec, inputs, in_place)
    bound = _bound(schedule, inputs, np_dtype)
    buffers = _buffers(schedule, inputs, np_dtype, in_place)
    replay = Replay(schedule, order, in_place)
    _replay_ops(schedule, order, replay, buffers)
    max_error, checked = _check_postcondition(schedule, replay, buffers, expected, bound)
    tolerant = spec.reduces and spec.redop in ("sum", "prod")
    return VerifyReport(
        algorithm=schedule.algorithm, spec=spec.name, dtype=np_dtype.name, n_ops=schedule.n_ops,
        n_steps=schedule.n_steps, ranks_checked=checked, max_abs_error=max_error,
        tolerance=float_tolerance(spec.nranks, np_dtype) if tolerant else "exact",
        in_place=in_place,
    )  # fmt: skip


def _expected(
    spec: CollectiveSpec, inputs: list[np.ndarray], in_place: bool
) -> list[np.ndarray | None]:
    """Every rank's expected output, computed before the replay (which may write into inputs);
    in place, an output the spec leaves undefined is the caller's input, left as it was."""
    expected = spec.reference(inputs)
    if in_place:
        expected = [
            x.copy() if want is None else want for x, want in zip(inputs, expected, strict=True)
        ]
    return expected


def _check_arguments(spec: CollectiveSpec, seed: int, in_place: bool) -> None:
    """The UsageErrors of :func:`verify`: in place for unequal sizes, a negative seed."""
    if in_place and spec.input_count != spec.output_count:
        raise UsageError(
            f"in place needs input and output of one size; {spec.name} has "
            f"{spec.input_count} and {spec.output_count} elements",
            source="in_place",
        )
    if seed < 0:
        raise UsageError(f"the seed must be >= 0, got {seed}", source="seed")


def _buffers(
    schedule: Schedule, inputs: list[np.ndarray], np_dtype: np.dtype, in_place: bool
) -> dict[tuple[int, int], np.ndarray]:
    """Every rank's input (the drawn data), output (poisoned, or the input itself in place) and
    scratch (poisoned), keyed by ``(rank, buffer)``."""
    spec = schedule.spec
    poison = (
        np.nan if np_dtype.kind == "f" or np_dtype.name == "bfloat16" else np.iinfo(np_dtype).min
    )
    buffers: dict[tuple[int, int], np.ndarray] = {}
    for r in range(spec.nranks):
        buffers[(r, int(Buffer.INPUT))] = inputs[r]
        buffers[(r, int(Buffer.OUTPUT))] = (
            inputs[r] if in_place else np.full(spec.output_count, poison, dtype=np_dtype)
        )
        buffers[(r, int(Buffer.SCRATCH))] = np.full(schedule.scratch_count, poison, dtype=np_dtype)
    return buffers


def _replay_ops(
    schedule: Schedule,
    order: np.ndarray,
    replay: Replay,
    buffers: dict[tuple[int, int], np.ndarray],
) -> None:
    """Replay every op in ``order``: hazards checked on ``replay``, data moved in ``buffers``."""
    t = schedule.table
    kind, count = t.kind.tolist(), t.count.tolist()
    sp, sr, sb, so = (
        t.src_ptr.tolist(),
        t.src_rank.tolist(),
        t.src_buffer.tolist(),
        t.src_offset.tolist(),
    )
    dp, dr, db, do = (
        t.dst_ptr.tolist(),
        t.dst_rank.tolist(),
        t.dst_buffer.tolist(),
        t.dst_offset.tolist(),
    )
    ufunc = reduce_ufunc(schedule.spec.redop)
    width = len(Buffer)
    ranks = range(schedule.spec.nranks)
    flat = [buffers.get((r, b)) for r in ranks for b in range(width)]
    shadows = [replay.shadow(r, b) for r in ranks for b in range(width)]  # in place: aliased
    home = [id(sh) for sh in shadows]  # one per buffer in memory (an alias: its input's)
    read, write, enter = replay.read, replay.write, replay.enter
    reduce_kind = int(OpKind.REDUCE)
    for op in order.tolist():
        bits = enter(op)
        c = count[op]
        if c == 0:
            continue
        s0, s1, d0, d1 = sp[op], sp[op + 1], dp[op], dp[op + 1]
        k = kind[op]
        if s1 - s0 == 1 and d1 - d0 == 1:  # one source, one destination: most ops
            src, dst = sr[s0] * width + sb[s0], dr[d0] * width + db[d0]
            read(shadows[src], op, bits, sr[s0], sb[s0], so[s0], c)
            if k == reduce_kind:
                read(shadows[dst], op, bits, dr[d0], db[d0], do[d0], c)
            write(shadows[dst], op, bits, dr[d0], db[d0], do[d0], c)
            apply_op(k, [flat[src][so[s0] : so[s0] + c]], [flat[dst][do[d0] : do[d0] + c]],
                     ufunc, disjoint=home[src] != home[dst])  # fmt: skip
            continue
        src_keys = [sr[j] * width + sb[j] for j in range(s0, s1)]
        dst_keys = [dr[j] * width + db[j] for j in range(d0, d1)]
        src_at = list(zip(src_keys, range(s0, s1), strict=True))
        dst_at = list(zip(dst_keys, range(d0, d1), strict=True))
        for key, j in src_at:
            read(shadows[key], op, bits, sr[j], sb[j], so[j], c)
        if k == reduce_kind:
            read(shadows[dst_keys[0]], op, bits, dr[d0], db[d0], do[d0], c)
        for key, j in dst_at:
            write(shadows[key], op, bits, dr[j], db[j], do[j], c)
        srcs = [flat[key][so[j] : so[j] + c] for key, j in src_at]
        dsts = [flat[key][do[j] : do[j] + c] for key, j in dst_at]
        disjoint = {home[key] for key in src_keys}.isdisjoint([home[key] for key in dst_keys])
        apply_op(k, srcs, dsts, ufunc, disjoint=disjoint)  # type: ignore[index]


def _replay_bytes(schedule: Schedule, itemsize: int) -> int:
    """What :func:`verify` allocates, about: per rank its input, output, scratch and expected
    output (plus the int8 draw of the input), and per op its share of the replay's state."""
    spec = schedule.spec
    per_rank = spec.input_count * (itemsize + 1) + 2 * spec.output_count * itemsize
    per_rank += schedule.scratch_count * itemsize
    return spec.nranks * per_rank + schedule.n_ops * BYTES_PER_OP


def _check_postcondition(
    schedule: Schedule,
    replay: Replay,
    buffers: dict[tuple[int, int], np.ndarray],
    expected: list[np.ndarray | None],
    bound: float,
) -> tuple[float, int]:
    """Compare every defined output with ``expected``; ``bound``: float tolerance (0: exact)."""
    spec = schedule.spec
    max_error, checked = 0.0, 0
    for r, want in enumerate(expected):
        if want is None:
            continue
        checked += 1
        sh = replay.shadow(r, int(Buffer.OUTPUT))
        for seg, w in enumerate(sh.writer):
            if w == UNWRITTEN and sh.pts[seg] < len(want) and sh.pts[seg + 1] > sh.pts[seg]:
                raise PostconditionError(
                    f"rank {r} output[{sh.pts[seg]}] was never written (required by {spec.name})",
                    rank=r,
                )
        got = buffers[(r, int(Buffer.OUTPUT))][: len(want)]
        if bound > 0:
            error = np.abs(got.astype(np.float64) - want.astype(np.float64))
            # equal values (equal infinities of an overflowing float16 prod included) are right
            bad = np.flatnonzero(~((error <= bound) | (got == want)))
            finite = error[np.isfinite(error)]
            if len(finite):
                max_error = max(max_error, float(finite.max()))
        else:
            bad = np.flatnonzero(got != want)
        if len(bad):
            i = int(bad[0])
            writer = sh.writer_at(i)
            by = f"last written by op {writer}" if writer >= 0 else "never written"
            raise PostconditionError(
                f"rank {r} output[{i}] is {got[i].item()!r}, expected {want[i].item()!r} "
                f"({by}; {spec.name})",
                rank=r, op=writer if writer >= 0 else None,
            )  # fmt: skip
    return max_error, checked


def _bound(schedule: Schedule, inputs: list[np.ndarray], dtype: np.dtype) -> float:
    """The absolute float tolerance (0 where results must be exact); see the module docstring."""
    spec = schedule.spec
    floating = dtype.kind == "f" or dtype.name == "bfloat16"
    if not (floating and spec.reduces and spec.redop in ("sum", "prod")) or not spec.count:
        return 0.0
    peaks = [max(abs(float(x.max())), abs(float(x.min()))) if len(x) else 0.0 for x in inputs]
    size = sum(peaks) if spec.redop == "sum" else float(np.prod(peaks))
    # both the schedule's result and the dtype reference carry reduction-order error
    return 2.0 * (spec.nranks * _eps(dtype) * size + _eps(dtype) * size)
