"""The bench job: nccl-tests' tables for a simulated fabric.

:func:`bench_rows` is what ``all_reduce_perf -b 8 -e 8G -f 2`` would print on the machine the
topology describes, one :class:`~scaleup.report.BenchRow` per size:

- sizes start at ``min_bytes`` and multiply by ``factor`` while they stay <= ``max_bytes``;
- ``count`` and the printed size follow nccl-tests (:func:`nccl_size_and_count`): for the blocked
  collectives (all_gather, reduce_scatter, all_to_all) the element count is truncated to a multiple
  of the world size and the count column is the per-rank block, as nccl-tests prints it;
- ``algbw = bytes / time``; ``busbw = algbw * factor`` with nccl-tests' bus factors;
- ``linkbw`` = bytes on the busiest channel / time: what the wires carried;
- algorithm, protocol and channels come from the tuner, which verifies every schedule once at a
  small count before trusting it (:func:`scaleup.sim.tuner.verified`).
"""

from __future__ import annotations

import math
from collections.abc import Callable

from scaleup.collectives.spec import BLOCKED_COLLECTIVES, COLLECTIVES, busbw_factor, numpy_dtype
from scaleup.errors import UsageError
from scaleup.limits import MAX_CHANNELS, check_at_most
from scaleup.report import BenchRow
from scaleup.topology.model import Topology
from scaleup.units import GB, GIB

__all__ = ["DEFAULT_MAX_BYTES", "bench_rows", "busbw_gb_per_s", "nccl_size_and_count", "sizes"]

#: The Quickstart table: all_reduce_perf -b 8 -e 8G -f 2.
DEFAULT_MAX_BYTES = 8 * GIB
#: Collectives with a root (nccl-tests prints -1 in the root column for the others).
ROOTED = frozenset({"broadcast", "reduce"})
#: Collectives that reduce (nccl-tests prints "none" in the redop column for the others).
REDUCING = frozenset({"all_reduce", "reduce_scatter", "reduce"})
#: Safety cap on the number of sizes of one sweep.
MAX_SIZES = 4096


def sizes(min_bytes: int, max_bytes: int, factor: float = 2) -> list[int]:
    """nccl-tests' size loop: ``min_bytes``, times ``factor``, while <= ``max_bytes``.

    >>> sizes(8, 64, 2)
    [8, 16, 32, 64]
    """
    if min_bytes < 0 or max_bytes < 0:
        raise UsageError("sizes must be >= 0", source="-b/-e")
    if min_bytes > max_bytes:
        raise UsageError(f"-b ({min_bytes}) must not exceed -e ({max_bytes})", source="-b/-e")
    if not 1 < factor < math.inf:
        raise UsageError(f"-f must be a finite number > 1, got {factor}", source="-f")
    out = [int(min_bytes)]
    size = float(min_bytes)
    while True:
        size = size * factor if size > 0 else 1.0
        if size >= max_bytes + 1:  # int(size) > max_bytes, before int(): size may be inf
            break
        nxt = int(size)
        if nxt != out[-1]:
            out.append(nxt)
        if len(out) > MAX_SIZES:
            raise UsageError(f"more than {MAX_SIZES} sizes; raise -f or narrow -b/-e", source="-f")
    return out


def nccl_size_and_count(
    collective: str, nbytes: int, itemsize: int, nranks: int
) -> tuple[int, int, int]:
    """(printed size in bytes, printed count, CollectiveSpec count) as nccl-tests computes them.

    >>> nccl_size_and_count("all_gather", 100, 4, 8)
    (96, 3, 24)
    >>> nccl_size_and_count("all_reduce", 100, 4, 8)
    (100, 25, 25)
    """
    count = int(nbytes) // int(itemsize)
    if collective in BLOCKED_COLLECTIVES:
        block = count // nranks
        return block * nranks * itemsize, block, block * nranks
    return count * itemsize, count, count


def busbw_gb_per_s(collective: str, nbytes: int, time_s: float, nranks: int) -> tuple[float, float]:
    """(algbw, busbw) in GB/s for ``nbytes`` moved in ``time_s`` (0 when the time is 0)."""
    if time_s <= 0:
        return 0.0, 0.0
    algbw = nbytes / time_s / GB
    return algbw, algbw * busbw_factor(collective, nranks)


def _resolve(topology: Topology | str) -> Topology:
    if isinstance(topology, Topology):
        return topology
    from scaleup.topology import resolve_topology

    return resolve_topology(topology)


def bench_rows(
    topology: Topology | str,
    collective: str = "all_reduce",
    min_bytes: int = 8,
    max_bytes: int = DEFAULT_MAX_BYTES,
    factor: float = 2,
    dtype: str = "float32",
    redop: str = "sum",
    nranks: int | None = None,
    algo: str | None = None,
    proto: str | None = None,
    root: int = 0,
    *,
    channels: int | None = None,
    family: str = "nccl",
    progress: Callable[[int, int], None] | None = None,
) -> list[BenchRow]:
    """Simulate an nccl-tests sweep on ``topology`` and return its rows.

    Parameters
    ----------
    topology
        A :class:`~scaleup.topology.Topology` or anything ``resolve_topology`` accepts.
    collective
        ``all_reduce``, ``all_gather``, ``reduce_scatter``, ``broadcast``, ``reduce``,
        ``all_to_all`` or ``send_recv``.
    min_bytes, max_bytes, factor
        nccl-tests' ``-b``, ``-e``, ``-f``.
    dtype, redop, root
        nccl-tests' ``-d``, ``-o``, ``-r``.
    nranks
        The first ``nranks`` accelerators (default all).
    algo, proto, channels
        Tuner overrides.
    family
        ``nccl``: the tuner picks among NCCL's algorithms (what nccl-tests would print);
        ``all``: also scaleup's own (direct, recursive).
    progress
        ``progress(done, total)`` after each size.

    Returns
    -------
    list[BenchRow]
        One row per size, ascending.

    Examples
    --------
    >>> rows = bench_rows("dgx-h100", min_bytes=1 << 20, max_bytes=1 << 20)  # doctest: +SKIP
    >>> rows[0].busbw_gb_per_s / rows[0].algbw_gb_per_s  # doctest: +SKIP
    1.75
    """
    from scaleup.sim.tuner import tune_sweep

    if collective not in COLLECTIVES:
        raise UsageError(
            f"unknown op {collective!r}; known: {', '.join(COLLECTIVES)}", source="--op"
        )
    if channels is not None:
        check_at_most(channels, MAX_CHANNELS, source="channels", name="MAX_CHANNELS")
    topo = _resolve(topology)
    itemsize = numpy_dtype(dtype).itemsize
    n = len(topo.accelerators) if nranks is None else int(nranks)
    if not 1 <= n <= len(topo.accelerators):
        raise UsageError(
            f"--ranks must be in 1..{len(topo.accelerators)} on {topo.name}, got {n}",
            source="--ranks",
        )
    if collective in ROOTED and not 0 <= root < n:
        raise UsageError(f"--root must be in 0..{n - 1}, got {root}", source="--root")
    size_list = sizes(min_bytes, max_bytes, factor)
    printed = [nccl_size_and_count(collective, s, itemsize, n) for s in size_list]
    total = len(size_list)
    choices = tune_sweep(
        topo,
        collective,
        [p[0] for p in printed],
        dtype=dtype,
        nranks=n,
        algo=algo,
        proto=proto,
        channels=channels,
        family=family,
        redop=redop if collective in REDUCING else "sum",
        root=root if collective in ROOTED else 0,
        progress=None if progress is None else (lambda done: progress(done, total)),
    )
    rows = []
    for (nbytes, count, _), choice in zip(printed, choices, strict=True):
        time_s = choice.time_s
        algbw, busbw = busbw_gb_per_s(collective, nbytes, time_s, n)
        busiest = getattr(choice.result, "busiest_channel_bytes", None)
        # None where no topology channel carried the bytes (staged through virtual host memory)
        unseen = busiest is None or (busiest <= 0 and nbytes > 0)
        linkbw = None if unseen or time_s <= 0 else float(busiest) / time_s / GB
        rows.append(
            BenchRow(
                topology=topo.name,
                collective=collective,
                bytes=nbytes,
                count=count,
                dtype=dtype,
                redop=redop if collective in REDUCING else "none",
                root=root if collective in ROOTED else -1,
                time_us=time_s * 1e6,
                algbw_gb_per_s=algbw,
                busbw_gb_per_s=busbw,
                linkbw_gb_per_s=linkbw,
                algo=choice.algorithm,
                proto=choice.protocol,
                channels=choice.channels,
                nranks=n,
                runtime="sim",
            )
        )
    return rows
