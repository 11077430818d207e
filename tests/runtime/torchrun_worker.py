"""A rank started torchrun-style (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT and nothing of
``scaleup run``'s): init, all_reduce a small float32 array, check, print. ``die`` as argument:
rank 1 dies right after init, without a goodbye; ``raise``: rank 1 raises instead; ``die0``:
rank 0 dies (SIGKILL) once rank 1 holds a segment of its own."""

from __future__ import annotations

import os
import signal
import sys
import time

import numpy as np

from scaleup import runtime as rt

rt.init()
me, n = rt.rank(), rt.world_size()
if sys.argv[1:] == ["die"] and me == 1:
    os._exit(3)
if sys.argv[1:] == ["die0"] and me == 0:
    time.sleep(1.0)  # rank 1 allocates its staging segment meanwhile
    os.kill(os.getpid(), signal.SIGKILL)
if sys.argv[1:] == ["raise"] and me == 1:
    raise ValueError("rank 1 gives up")
x = np.full(4, float(me + 1), dtype=np.float32)
rt.all_reduce(x)
if not np.array_equal(x, np.full(4, n * (n + 1) / 2, dtype=np.float32)):
    sys.exit(f"rank {me}: wrong sum {x}")
print(f"rank {me} of {n}: {x[0]:g}")
rt.shutdown()
