"""Run under ``mpiexec -n 2``: the runtime API over the mpi transport; exit 0 when all is right."""

from __future__ import annotations

import sys

import numpy as np
import runtime_workers as workers

from scaleup import runtime as rt


def main() -> int:
    rt.init(transport="mpi")
    me, n = rt.rank(), rt.world_size()
    failures = workers.sweep([0, 1, 7, 1000])
    cell = rt.alloc(1, "int64")
    rt.barrier()
    olds = [rt.atomic_fetch_add(cell, 1, 0) for _ in range(10)]
    x = rt.alloc(5, "float32")
    rt.put(x, np.full(5, me + 1.0, dtype=np.float32), (me + 1) % n)
    rt.barrier()
    got = rt.get(x, (me + 1) % n)
    if me == 0 and int(cell[0]) != 10 * n:
        failures.append(f"atomic total {int(cell[0])}")
    if (
        len(set(olds)) != len(olds)
        or not np.all(x == ((me - 1) % n) + 1)
        or not np.all(got == me + 1)
    ):
        failures.append(f"rank {me}: put/get/atomic wrong: {olds} {x} {got}")
    rt.shutdown()
    for failure in failures:
        print(failure, file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
