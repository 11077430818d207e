"""The bench job: nccl-tests' rows for a simulated fabric, or measured on this machine.

:func:`bench_rows` is what ``all_reduce_perf -b 8 -e 8G -f 2`` would print on the machine the
topology describes, one :class:`~scaleup.report.BenchRow` per size of the
:class:`~scaleup.tune.request.BenchRequest`:

- ``count`` and the printed size follow nccl-tests
  (:func:`~scaleup.collectives.spec.nccl_size_and_count`): for the blocked collectives
  (all_gather, reduce_scatter, all_to_all) the element count is truncated to a multiple of the
  world size and the count column is the per-rank block, as nccl-tests prints it;
- ``algbw = bytes / time``; ``busbw = algbw * factor`` with nccl-tests' bus factors;
- ``linkbw`` = bytes on the busiest channel / time: what the wires carried
  (:attr:`scaleup.sim.SimResult.linkbw_gb_per_s`);
- algorithm, protocol and channels come from the tuner (:mod:`scaleup.tune`), which verifies the
  structure of every schedule it times before trusting it (:mod:`scaleup.tune.checks`).

:func:`runtime_rows` answers the same request with real processes (``scaleup bench --runtime``).
"""

from __future__ import annotations

from scaleup.collectives.spec import busbw_factor, nccl_size_and_count
from scaleup.errors import UsageError
from scaleup.report import BenchRow
from scaleup.topology import resolve_topology
from scaleup.topology.model import Topology
from scaleup.tune import BenchRequest, TunedChoice, TuneSession, nccl_sizes
from scaleup.tune.search import Progress
from scaleup.units import GB, GIB

__all__ = [
    "DEFAULT_MAX_BYTES",
    "RUNTIMES",
    "bench_rows",
    "busbw_gb_per_s",
    "nccl_size_and_count",
    "runtime_rows",
    "sizes",
]

#: The Quickstart table: all_reduce_perf -b 8 -e 8G -f 2.
DEFAULT_MAX_BYTES = 8 * GIB
#: Transports ``runtime_rows`` measures over.
RUNTIMES = ("shm", "pipe", "mpi")
#: nccl-tests' size loop (``-b``, ``-e``, ``-f``).
sizes = nccl_sizes


def busbw_gb_per_s(collective: str, nbytes: int, time_s: float, nranks: int) -> tuple[float, float]:
    """(algbw, busbw) in GB/s for ``nbytes`` moved in ``time_s`` (0 when the time is 0)."""
    if time_s <= 0:
        return 0.0, 0.0
    algbw = nbytes / time_s / GB
    return algbw, algbw * busbw_factor(collective, nranks)


def bench_rows(
    topology: Topology | str,
    request: BenchRequest | None = None,
    *,
    session: TuneSession | None = None,
    progress: Progress | None = None,
) -> list[BenchRow]:
    """Simulate an nccl-tests sweep on ``topology`` and return its rows.

    Parameters
    ----------
    topology
        A :class:`~scaleup.topology.Topology` or anything ``resolve_topology`` accepts.
    request
        The collective, sizes, dtype, ... (default: all_reduce, 8 B .. 8 GiB, x2).
    session
        The tuning session (default a new one; pass one to share schedules between topologies).
    progress
        ``progress(done, total)`` after each size.

    Returns
    -------
    list[BenchRow]
        One row per size, in the request's order.

    Examples
    --------
    >>> rows = bench_rows("dgx-h100", BenchRequest(sizes_bytes=(1 << 20,)))
    >>> round(rows[0].busbw_gb_per_s / rows[0].algbw_gb_per_s, 9)
    1.75
    """
    topo = topology if isinstance(topology, Topology) else resolve_topology(topology)
    request = request or BenchRequest()
    n = request.nranks_on(topo)
    choices = (session or TuneSession()).sweep(topo, request, progress=progress)
    return [
        _row(topo.name, request, n, nbytes, count, choice)
        for (nbytes, count, _), choice in zip(request.printed(n), choices, strict=True)
    ]


def _row(
    name: str, request: BenchRequest, n: int, nbytes: int, count: int, choice: TunedChoice
) -> BenchRow:
    algbw, busbw = busbw_gb_per_s(request.op, nbytes, choice.time_s, n)
    return BenchRow(
        topology=name,
        collective=request.op,
        bytes=nbytes,
        count=count,
        dtype=request.dtype,
        redop=request.printed_redop,
        root=request.printed_root,
        time_us=choice.time_s * 1e6,
        algbw_gb_per_s=algbw,
        busbw_gb_per_s=busbw,
        linkbw_gb_per_s=choice.result.linkbw_gb_per_s,
        algo=choice.algorithm,
        proto=choice.protocol,
        channels=choice.channels,
        nranks=n,
        runtime="sim" if choice.result.model == "event" else f"sim-{choice.result.model}",
    )


def runtime_rows(
    request: BenchRequest,
    transport: str,
    *,
    iters: int | None = None,
    warmup: int | None = None,
    check: bool = True,
) -> list[BenchRow]:
    """Measure ``request`` on ``request.ranks`` real processes over ``transport``.

    The runtime honours the collective, sizes, dtype, redop, root and algorithm; the tuner's
    protocol, channel and family overrides have no meaning there and are refused. ``check``
    compares every timed iteration's output with the numpy reference (nccl-tests' ``-c 1``).
    """
    if transport not in RUNTIMES:
        raise UsageError(
            f"unknown runtime {transport!r}; known: {', '.join(RUNTIMES)}", source="runtime"
        )
    if request.ranks is None:
        raise UsageError("a runtime run needs ranks (the number of processes)", source="ranks")
    for field, value, default in (
        ("protocol", request.protocol, None),
        ("channels", request.channels, None),
        ("family", request.family, "nccl"),
    ):
        if value != default:
            raise UsageError(
                f"{field} pins the simulated tuner; the runtime has none", source=field
            )
    from scaleup.runtime import measure

    return measure.bench_rows(
        transport,
        request.ranks,
        request.op,
        list(request.sizes_bytes),
        dtype=request.dtype,
        algo=request.algorithm,
        iters=iters,
        warmup=warmup,
        redop=request.nccl_redop,
        root=request.spec_root,
        check=check,
    )
