"""Which Schedule a runtime collective executes, and whether it may run in place.

The algorithm library (:mod:`scaleup.collectives.algorithms`) is asked first. The runtime keeps
its own *direct* builders for every collective (each rank loads what it needs straight from its
peers' buffers), so it works before, and independently of, that library:

- ``all_reduce`` two-shot: rank r reduces slice r from every peer's input into its output, then
  loads every other reduced slice from its owner. One-shot (``shot=1``): every rank reduces the
  whole buffer from every peer (fewer flag rounds; for small messages).
- ``reduce_scatter``: rank r reduces block r from every peer. ``all_gather``, ``all_to_all``,
  ``broadcast``: rank r loads what it needs. ``reduce``: the root reduces from every peer.

In place (torch semantics: ``all_reduce(x)`` overwrites ``x``) means input and output are the same
memory. That is only correct when the schedule has no hazard once the two buffers alias;
:func:`in_place_safe` checks exactly that (every pair of overlapping accesses, one a write, is
ordered by the dependency DAG, and one replay on aliased buffers gives the reference answer).
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np

from scaleup.collectives.build import ScheduleBuilder
from scaleup.collectives.schedule import Buffer, OpKind, Schedule
from scaleup.collectives.spec import CollectiveSpec
from scaleup.errors import UnsupportedCollective

__all__ = ["SMALL_BYTES", "direct_schedule", "in_place_safe", "select_schedule"]

#: Up to this many bytes all_reduce defaults to one-shot (fewer synchronisation rounds).
SMALL_BYTES = 64 * 1024


def _slices(count: int, n: int) -> list[tuple[int, int]]:
    """n contiguous (offset, count) slices covering ``count`` elements, sizes differing by <= 1."""
    base, extra = divmod(count, n)
    out, offset = [], 0
    for r in range(n):
        c = base + (r < extra)
        out.append((offset, c))
        offset += c
    return out


def direct_schedule(spec: CollectiveSpec, *, shot: int = 2) -> Schedule:
    """The runtime's direct load/store schedule for ``spec`` (see the module docstring)."""
    n, c, b = spec.nranks, spec.collective, spec.block_count
    builder = ScheduleBuilder(spec, "direct", params={"shot": shot} if c == "all_reduce" else {})
    ranks = range(n)
    if c == "all_reduce" and shot == 1:
        for r in ranks:
            builder.copy(builder.input(r, 0, spec.count), builder.output(r, 0, spec.count), rank=r)
            for p in ranks:
                if p != r:
                    builder.reduce(
                        builder.input(p, 0, spec.count), builder.output(r, 0, spec.count)
                    )
    elif c == "all_reduce":
        parts = _slices(spec.count, n)
        for r in ranks:
            off, cnt = parts[r]
            if cnt:
                builder.copy(builder.input(r, off, cnt), builder.output(r, off, cnt), rank=r)
                for p in ranks:
                    if p != r:
                        builder.reduce(builder.input(p, off, cnt), builder.output(r, off, cnt))
        for r in ranks:
            for p in ranks:
                off, cnt = parts[p]
                if p != r and cnt:
                    builder.copy(builder.output(p, off, cnt), builder.output(r, off, cnt), rank=r)
    elif c in ("reduce_scatter", "reduce"):
        roots = ranks if c == "reduce_scatter" else [spec.root]
        for r in roots:
            off, cnt = (r * b, b) if c == "reduce_scatter" else (0, spec.count)
            if cnt:
                builder.copy(builder.input(r, off, cnt), builder.output(r, 0, cnt), rank=r)
                for p in ranks:
                    if p != r:
                        builder.reduce(builder.input(p, off, cnt), builder.output(r, 0, cnt))
    elif c in ("all_gather", "all_to_all"):
        for r in ranks:
            for p in ranks:
                src_off = 0 if c == "all_gather" else r * b
                if b:
                    builder.copy(builder.input(p, src_off, b), builder.output(r, p * b, b), rank=r)
    elif c == "broadcast":
        for r in ranks:
            if spec.count:
                builder.copy(
                    builder.input(spec.root, 0, spec.count),
                    builder.output(r, 0, spec.count),
                    rank=r,
                )
    else:
        raise UnsupportedCollective(f"the runtime has no direct schedule for {c}", source="direct")
    return builder.build()


def _library_schedule(algo: str, spec: CollectiveSpec, params: dict[str, int]) -> Schedule | None:
    try:
        from scaleup.collectives.algorithms import build_schedule  # type: ignore[attr-defined]
    except ImportError:
        return None
    return build_schedule(algo, spec, **params)  # type: ignore[no-any-return]


#: Above this many elements the aliased replay runs on the same algorithm at a small count.
_REPLAY_COUNT = 1 << 16


def _build(spec: CollectiveSpec, name: str, shot: int) -> Schedule:
    if name == "direct":
        try:
            schedule = _library_schedule(
                "direct", spec, {"shot": shot} if spec.collective == "all_reduce" else {}
            )
        except (UnsupportedCollective, TypeError):
            schedule = None
        return schedule if schedule is not None else direct_schedule(spec, shot=shot)
    schedule = _library_schedule(name, spec, {})
    if schedule is None:
        raise UnsupportedCollective(
            f"algorithm {name!r} needs scaleup.collectives.algorithms", source=name
        )
    return schedule


@lru_cache(maxsize=256)
def select_schedule(spec: CollectiveSpec, algo: str | None, itemsize: int) -> tuple[Schedule, bool]:
    """The schedule to run for ``spec`` and whether it is safe with input aliased to output.

    ``algo`` None means ``direct`` (one-shot all_reduce up to :data:`SMALL_BYTES`, two-shot
    above). Names come from the algorithm library; ``direct`` falls back to the runtime's own
    builder when the library does not offer it. Large schedules are replayed at a small count of
    the same algorithm and shot (the structure does not depend on the count).
    """
    name = algo or "direct"
    shot = 1 if spec.collective == "all_reduce" and spec.count * itemsize <= SMALL_BYTES else 2
    schedule = _build(spec, name, shot)
    replay = None
    if spec.input_count > _REPLAY_COUNT:
        small = CollectiveSpec(
            spec.collective, spec.nranks, spec.nranks * 97 + 3, spec.root, spec.redop
        )
        replay = _build(small, name, shot)
    return schedule, in_place_safe(schedule, replay=replay)


def in_place_safe(schedule: Schedule, max_ops: int = 4096, replay: Schedule | None = None) -> bool:
    """Whether ``schedule`` stays correct when each rank's output aliases its input.

    ``replay``: a same-structure schedule at a small count to replay instead of ``schedule``.
    """
    spec = schedule.spec
    if spec.collective not in ("all_reduce", "broadcast", "reduce") or schedule.n_ops > max_ops:
        return False
    t = schedule.table
    reach = [0] * t.n_ops  # bitset of transitive predecessors
    for i in range(t.n_ops):
        bits = 0
        for d in t.deps_of(i):
            bits |= reach[int(d)] | (1 << int(d))
        reach[i] = bits
    accesses: dict[int, list[tuple[int, int, int, bool]]] = {}
    for i in range(t.n_ops):
        cnt = int(t.count[i])
        for ptr, rk, buf, off, write in (
            (t.src_ptr, t.src_rank, t.src_buffer, t.src_offset, False),
            (t.dst_ptr, t.dst_rank, t.dst_buffer, t.dst_offset, True),
        ):
            for j in range(ptr[i], ptr[i + 1]):
                if int(buf[j]) == Buffer.SCRATCH:
                    continue
                accesses.setdefault(int(rk[j]), []).append(
                    (int(off[j]), int(off[j]) + cnt, i, write)
                )
    for items in accesses.values():
        items.sort()
        for a in range(len(items)):
            lo, hi, i, wi = items[a]
            for b in range(a + 1, len(items)):
                lo2, _hi2, j, wj = items[b]
                if lo2 >= hi:
                    break
                if i != j and (wi or wj) and not (reach[j] >> i & 1 or reach[i] >> j & 1):
                    return False
    return _aliased_replay_ok(schedule if replay is None else replay)


def _aliased_replay_ok(schedule: Schedule) -> bool:
    """Replay on int64 data with output == input and compare with the reference."""
    spec = schedule.spec
    ramp = np.arange(spec.input_count, dtype=np.int64)
    if spec.redop == "prod":
        inputs = [1 + (ramp * (r + 3) + r) % 2 for r in range(spec.nranks)]
    else:
        inputs = [(ramp * (2 * r + 3) + 5 * r) % 17 - 8 for r in range(spec.nranks)]
    memory = [x.copy() for x in inputs]
    scratch = [np.zeros(schedule.scratch_count, dtype=np.int64) for _ in range(spec.nranks)]
    ufunc = {"sum": np.add, "prod": np.multiply, "max": np.maximum, "min": np.minimum}[spec.redop]

    def view(rank: int, buffer: int) -> np.ndarray:
        return scratch[rank] if buffer == Buffer.SCRATCH else memory[rank]

    for op in schedule.ops:
        srcs = [view(c.rank, c.buffer)[c.offset : c.offset + c.count].copy() for c in op.srcs]
        if op.kind == OpKind.SWITCH_REDUCE:
            value = srcs[0]
            for s in srcs[1:]:
                value = ufunc(value, s)
        for k, c in enumerate(op.dsts):
            dst = view(c.rank, c.buffer)[c.offset : c.offset + c.count]
            if op.kind == OpKind.COPY:
                dst[...] = srcs[k if k < len(srcs) else 0]
            elif op.kind == OpKind.REDUCE:
                ufunc(dst, srcs[0], out=dst)
            else:
                dst[...] = value
    for rank, expected in enumerate(spec.reference(inputs)):
        if expected is not None and not np.array_equal(memory[rank][: len(expected)], expected):
            return False
    return True
