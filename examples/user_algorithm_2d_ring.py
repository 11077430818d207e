"""A user-written algorithm: 2D-ring all_reduce on an R x C grid of ranks, built and verified.

Rank ``r`` sits at row ``r // C``, column ``r % C``. Phase 1 reduces each element across its row
(a ring of C ranks: reduce-scatter then all-gather), phase 2 across its column; afterwards every
rank holds the sum over all R x C ranks. The builder infers the dependencies from the chunks each
op reads and writes, so the algorithm is just its data movement.

Run: ``python examples/user_algorithm_2d_ring.py`` (prints one line per dtype).
"""

from __future__ import annotations

from scaleup.collectives.build import ScheduleBuilder
from scaleup.collectives.schedule import Schedule
from scaleup.collectives.spec import CollectiveSpec
from scaleup.collectives.verify import verify


def ring_all_reduce(b: ScheduleBuilder, ring: list[int], count: int, step0: int) -> None:
    """In-place ring all_reduce of the outputs over ``ring``: reduce-scatter, then all-gather."""
    n = len(ring)
    sizes = [count // n + (i < count % n) for i in range(n)]  # uneven counts: ceil blocks first
    offsets = [sum(sizes[:i]) for i in range(n)]
    for s in range(n - 1):  # reduce-scatter: block (i - s) moves from ring[i] to ring[i + 1]
        for i in range(n):
            j = (i - s) % n
            src, dst = (
                b.output(ring[i], offsets[j], sizes[j]),
                b.output(ring[(i + 1) % n], offsets[j], sizes[j]),
            )
            b.reduce(src, dst, step=step0 + s)
    for s in range(n - 1):  # all-gather: ring[i] owns block i + 1 and passes it on
        for i in range(n):
            j = (i + 1 - s) % n
            src, dst = (
                b.output(ring[i], offsets[j], sizes[j]),
                b.output(ring[(i + 1) % n], offsets[j], sizes[j]),
            )
            b.copy(src, dst, step=step0 + n - 1 + s)


def two_d_ring(rows: int, cols: int, count: int) -> Schedule:
    """All_reduce over rows x cols ranks: rings along the rows, then along the columns."""
    spec = CollectiveSpec("all_reduce", nranks=rows * cols, count=count)
    b = ScheduleBuilder(spec, "2d-ring", params={"rows": rows, "cols": cols})
    for r in range(spec.nranks):
        b.copy(b.input(r, 0, count), b.output(r, 0, count))
    for row in range(rows):
        ring_all_reduce(b, [row * cols + c for c in range(cols)], count, step0=0)
    for col in range(cols):
        ring_all_reduce(b, [r * cols + col for r in range(rows)], count, step0=2 * (cols - 1))
    return b.build()


if __name__ == "__main__":
    schedule = two_d_ring(rows=2, cols=4, count=1000)
    for dtype in ("int32", "float32", "float16"):
        print(f"ok: {verify(schedule, dtype)}")
