"""All-reduce across real processes by direct loads and stores into shared memory.

Run with ``scaleup run -n 2 examples/runtime_allreduce.py [count]``. Every rank fills a symmetric
buffer with its rank + 1, all-reduces it in place, reads its right-hand neighbour's copy directly
(``get_buffer``) and rank 0 prints one line.
"""

from __future__ import annotations

import sys

import numpy as np

from scaleup import runtime as rt


def main() -> None:
    count = int(sys.argv[1]) if len(sys.argv) > 1 else 1024
    rt.init()
    me, n = rt.rank(), rt.world_size()
    x = rt.alloc(count, "float32")
    x[:] = me + 1
    rt.all_reduce(x)
    rt.barrier()  # the neighbour has finished too before we read its copy
    expected = n * (n + 1) / 2
    neighbour = rt.get_buffer(x, (me + 1) % n) if rt.group().transport.memory_semantic else x
    ok = bool(np.all(x == expected) and np.all(neighbour == expected))
    if me == 0:
        print(f"world_size={n} count={count} sum={float(x[0]):g} ok={ok}")
    if not ok:
        sys.exit(1)


if __name__ == "__main__":
    main()
