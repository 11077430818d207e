"""The memory-semantic runtime: real collectives across processes over shared memory.

Workers are processes; each one's "device memory" is a shared-memory segment every peer maps, so
collectives run by direct loads and stores (the ``shm`` transport), executing the same Schedules
the simulator times. ``pipe`` does the same by message passing (the degraded case), ``local`` is
an in-process mock with threads, ``mpi`` uses MPI-3 one-sided windows under ``mpiexec``.
torch.distributed's names (``init_process_group``, ``send``/``recv`` ...) work as its users expect.
See ``docs/runtime.md``.
"""

from __future__ import annotations

from scaleup.runtime.api import (
    ReduceOp,
    Work,
    all_gather,
    all_reduce,
    all_to_all,
    alloc,
    atomic_fetch_add,
    barrier,
    broadcast,
    destroy_process_group,
    fence,
    free,
    get,
    get_buffer,
    get_global_rank,
    get_group_rank,
    get_process_group_ranks,
    get_rank,
    get_world_size,
    group,
    init,
    init_process_group,
    irecv,
    is_initialized,
    isend,
    new_group,
    put,
    quiet,
    rank,
    recv,
    reduce,
    reduce_scatter,
    send,
    shutdown,
    world_size,
)
from scaleup.runtime.group import ProcessGroup
from scaleup.runtime.launch import launch, run_script
from scaleup.runtime.subgroup import SubGroup

__all__ = [
    "ProcessGroup",
    "ReduceOp",
    "SubGroup",
    "Work",
    "all_gather",
    "all_reduce",
    "all_to_all",
    "alloc",
    "atomic_fetch_add",
    "barrier",
    "broadcast",
    "destroy_process_group",
    "fence",
    "free",
    "get",
    "get_buffer",
    "get_global_rank",
    "get_group_rank",
    "get_process_group_ranks",
    "get_rank",
    "get_world_size",
    "group",
    "init",
    "init_process_group",
    "irecv",
    "is_initialized",
    "isend",
    "launch",
    "new_group",
    "put",
    "quiet",
    "rank",
    "recv",
    "reduce",
    "reduce_scatter",
    "run_script",
    "send",
    "shutdown",
    "world_size",
]
