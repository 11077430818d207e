"""Timing real collectives as nccl-tests does: rows for ``scaleup bench --runtime shm|pipe|mpi``.

Per size, nccl-tests' two groups, out of place (input and output buffers apart) then in place
(the output aliasing the input, or this rank's block of it for all_gather and reduce_scatter,
as NCCL aliases them): ``warmup`` untimed calls, then ``iters`` timed ones, each started right
after a barrier; an iteration's time is the slowest rank's, and the row reports the median over
iterations. With ``check`` every timed iteration starts from known inputs and its output is
compared, untimed, with the numpy reference: the rows count the wrong elements (``#wrong``).
Iterations scale with size (:func:`default_iters`). Buffers are symmetric (``alloc``), so the
memory-semantic path is zero-copy, and are touched once before timing so that page faults are
not measured. ``mpi`` rows run ``python -m scaleup.runtime.measure`` under ``mpiexec``.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from functools import partial
from typing import Any

import numpy as np

from scaleup.collectives.spec import (
    CollectiveSpec,
    busbw_factor,
    nccl_size_and_count,
    numpy_dtype,
    reduce_ufunc,
)
from scaleup.errors import TransportError, UsageError
from scaleup.report import BenchRow

__all__ = ["bench_rows", "default_iters", "mpiexec_path"]


def default_iters(nbytes: int) -> tuple[int, int]:
    """(warm-up, timed) iterations for a message of ``nbytes``."""
    if nbytes <= 64 * 1024:
        return 20, 200
    if nbytes <= 1 << 20:
        return 5, 50
    if nbytes <= 16 << 20:
        return 3, 15
    return 2, 7


def mpiexec_path() -> str | None:
    """The mpiexec next to this Python (the mpich wheel puts it there), else on PATH."""
    local = os.path.join(os.path.dirname(sys.executable), "mpiexec")
    return local if os.access(local, os.X_OK) else shutil.which("mpiexec")


def _count(collective: str, nbytes: int, itemsize: int, n: int) -> int:
    return nccl_size_and_count(collective, nbytes, itemsize, n)[2]


#: Seed of the checked inputs (rank ``p`` draws from ``(seed, p)``).
_SEED = 20260
#: One size's result on one rank: out-of-place and in-place seconds per timed iteration, and the
#: wrong elements of each group over its timed iterations (None: not checked).
Sample = tuple[list[float], list[float], int | None, int | None]


def _input_of(spec: CollectiveSpec, dtype: np.dtype, peer: int) -> np.ndarray:
    """Rank ``peer``'s input: small integers (1 or 2 for prod), which every reduction order sums
    or multiplies exactly (up to 64 bfloat16 ranks), so the check can ask for equality."""
    rng = np.random.default_rng((_SEED, peer))
    n = spec.input_count
    if spec.reduces and spec.redop == "prod":
        values = rng.integers(1, 2, size=n, endpoint=True, dtype=np.int8)
    else:
        values = rng.integers(
            0 if dtype.kind == "u" else -4, 4, size=n, endpoint=True, dtype=np.int8
        )
    return values.astype(dtype)


def _expected(spec: CollectiveSpec, dtype: np.dtype, rank: int, avg: bool) -> np.ndarray | None:
    """What ``rank``'s output must hold (None where the collective leaves it unspecified), built
    one peer's input at a time so that memory stays a few buffers whatever the rank count."""
    n, b, c = spec.nranks, spec.block_count, spec.collective
    if c == "reduce" and rank != spec.root:
        return None
    if c == "broadcast":
        return _input_of(spec, dtype, spec.root)
    if c in ("all_gather", "all_to_all"):
        cut = (0, b) if c == "all_gather" else (rank * b, (rank + 1) * b)
        return np.concatenate([_input_of(spec, dtype, p)[cut[0] : cut[1]] for p in range(n)])
    part = slice(rank * b, (rank + 1) * b) if c == "reduce_scatter" else slice(None)
    total = np.array(_input_of(spec, dtype, 0)[part], copy=True)
    for p in range(1, n):
        reduce_ufunc(spec.redop)(total, _input_of(spec, dtype, p)[part], out=total)
    if avg:  # as the runtime divides: the exact sum over n, in the buffer's type
        np.divide(total, n, out=total, casting="unsafe")
    return total


def _views(
    spec: CollectiveSpec, src: np.ndarray, dst: np.ndarray, rank: int, in_place: bool
) -> tuple[np.ndarray, np.ndarray]:
    """(input, output) of one call. Out of place: two buffers. In place as nccl-tests aliases
    them: the same array, or this rank's block of the other (all_gather, reduce_scatter)."""
    i, o = spec.input_count, spec.output_count
    if not in_place:
        return src[:i], dst[:o]
    if spec.collective == "all_gather":
        out = dst[:o]
        return out[rank * i : (rank + 1) * i], out
    inp = src[:i]
    if spec.collective == "reduce_scatter":
        return inp, inp[rank * o : (rank + 1) * o]
    return inp, inp


def _call(
    collective: str, inp: np.ndarray, out: np.ndarray, redop: str, root: int, algo: str | None
) -> Callable[[], object]:
    from scaleup import runtime as rt

    other = None if out is inp else out  # in place: the torch form, one array
    calls: dict[str, Callable[[], object]] = {
        "all_reduce": partial(rt.all_reduce, inp, redop, algo=algo, output=other),
        "reduce": partial(rt.reduce, inp, root, redop, algo=algo, output=other),
        "broadcast": partial(rt.broadcast, inp, root, algo=algo, output=other),
        "reduce_scatter": partial(rt.reduce_scatter, out, inp, redop, algo=algo),
        "all_gather": partial(rt.all_gather, out, inp, algo=algo),
        "all_to_all": partial(rt.all_to_all, out, inp, algo=algo),
    }
    return calls[collective]


def _time_group(
    spec: CollectiveSpec,
    views: tuple[np.ndarray, np.ndarray],
    call: Callable[[], object],
    counts: tuple[int, int],
    expected: np.ndarray | None,
    check: bool,
) -> tuple[list[float], int | None]:
    """Warm up, then time each iteration after a barrier; with ``check``, every iteration
    starts from this rank's input and its output is compared with ``expected`` (untimed)."""
    from scaleup import runtime as rt

    inp, out = views
    mine = _input_of(spec, inp.dtype, rt.rank()) if check else None
    wrong = 0
    warmup, iters = counts
    for _ in range(warmup):
        if mine is not None:
            inp[:] = mine
        call()
    samples = []
    for _ in range(iters):
        if mine is not None:
            inp[:] = mine
        rt.barrier()
        start = time.perf_counter()
        call()
        samples.append(time.perf_counter() - start)
        if check and expected is not None:
            wrong += int(np.count_nonzero(out != expected))
    return samples, (wrong if check else None)


def _time_sizes(
    collective: str,
    sizes: list[int],
    dtype_name: str,
    algo: str | None,
    iters: int | None,
    warmup: int | None,
    redop: str,
    root: int = 0,
    check: bool = True,
) -> list[Sample]:
    """On every rank, per size: nccl-tests' out-of-place then in-place group (called inside a
    launched rank)."""
    from scaleup import runtime as rt

    rt.init()
    n, rank = rt.world_size(), rt.rank()
    dtype = numpy_dtype(dtype_name)
    spec_redop = "sum" if redop == "avg" else redop
    specs = [
        CollectiveSpec(collective, n, _count(collective, s, dtype.itemsize, n), root=root,
                       redop=spec_redop)
        for s in sizes
    ]  # fmt: skip
    src = rt.alloc(max([sp.input_count for sp in specs] + [1]), dtype)
    dst = rt.alloc(max([sp.output_count for sp in specs] + [1]), dtype)
    src[:] = 1 if redop == "prod" else 0
    dst[:] = 1 if redop == "prod" else 0
    out: list[Sample] = []
    for spec in specs:
        w, k = default_iters(spec.count * dtype.itemsize)
        counts = (w if warmup is None else warmup), (k if iters is None else iters)
        expected = _expected(spec, dtype, rank, redop == "avg") if check else None
        groups = []
        for in_place in (False, True):
            views = _views(spec, src, dst, rank, in_place)
            call = _call(collective, *views, redop, root, algo)
            groups.append(_time_group(spec, views, call, counts, expected, check))
        (oop, oop_wrong), (ip, ip_wrong) = groups
        out.append((oop, ip, oop_wrong, ip_wrong))
    return out


def _rows(
    transport: str,
    nranks: int,
    collective: str,
    sizes: list[int],
    dtype_name: str,
    algo: str | None,
    redop: str,
    root: int,
    per_rank: list[list[Sample]],
) -> list[BenchRow]:
    dtype = numpy_dtype(dtype_name)
    rows = []
    for k, size in enumerate(sizes):
        nbytes, count, _ = nccl_size_and_count(collective, size, dtype.itemsize, nranks)
        times = [
            _median_slowest([rank[k][0] for rank in per_rank]),
            _median_slowest([rank[k][1] for rank in per_rank]),
        ]
        wrong, ip_wrong = _total([r[k][2] for r in per_rank]), _total([r[k][3] for r in per_rank])
        algbw = nbytes / times[0] / 1e9 if times[0] > 0 else 0.0
        rows.append(BenchRow(
            topology=f"local-{transport}", collective=collective, bytes=nbytes, count=count,
            dtype=dtype_name, redop=redop if collective in _REDUCING else "none",
            root=root if collective in ("broadcast", "reduce") else -1,  # as nccl-tests prints them
            time_us=times[0] * 1e6, algbw_gb_per_s=algbw,
            busbw_gb_per_s=algbw * busbw_factor(collective, nranks), linkbw_gb_per_s=None,
            algo=algo or "direct", proto="simple", channels=1, nranks=nranks, runtime=transport,
            in_place_time_us=times[1] * 1e6, wrong=wrong, in_place_wrong=ip_wrong,
        ))  # fmt: skip
    return rows


def _total(counts: list[Any]) -> int | None:
    """Wrong elements over the ranks (None when unchecked)."""
    return None if any(c is None for c in counts) else sum(int(c) for c in counts)


def _median_slowest(per_rank: list[list[float]]) -> float:
    """An iteration's time is its slowest rank's; the median over iterations (nan if none)."""
    slowest = np.max(np.array(per_rank), axis=0) if per_rank and per_rank[0] else []
    return float(np.median(slowest)) if len(slowest) else float("nan")


_REDUCING = frozenset({"all_reduce", "reduce_scatter", "reduce"})


def bench_rows(
    transport: str,
    nranks: int,
    collective: str,
    sizes_bytes: list[int],
    dtype: str = "float32",
    algo: str | None = None,
    iters: int | None = None,
    warmup: int | None = None,
    redop: str = "sum",
    root: int = 0,
    check: bool = True,
) -> list[BenchRow]:
    """Measure ``collective`` on ``nranks`` real ranks over ``transport``; one row per size,
    with nccl-tests' out-of-place and in-place groups.

    Parameters
    ----------
    transport
        ``shm``, ``pipe``, ``local`` or ``mpi`` (runs under mpiexec).
    nranks
        World size.
    collective, sizes_bytes, dtype, algo, redop, root
        As ``scaleup bench``: sizes are nccl-tests sizes (bytes of the size column); ``root``
        is the root of broadcast and reduce.
    iters, warmup
        Timed and untimed iterations per size; default scaled by size (:func:`default_iters`).
    check
        Start every timed iteration from known inputs and count the output elements that differ
        from the numpy reference (the rows' ``wrong``, ``in_place_wrong``); untimed.
    """
    if collective == "send_recv":
        raise UsageError("the runtime does not implement send_recv", source="op")
    sizes = [int(s) for s in sizes_bytes]
    if redop == "avg" and numpy_dtype(dtype).kind in "iub":
        raise UsageError(f"the runtime averages floating types only, not {dtype}", source="redop")
    numpy_dtype(dtype)
    args = (collective, sizes, dtype, algo, iters, warmup, redop, root, check)
    if transport == "mpi":
        per_rank = _mpi_times(nranks, *args)
    else:
        from scaleup.runtime.launch import launch

        per_rank = launch(_time_sizes, nranks, *args, transport=transport, timeout_s=120.0)
    return _rows(transport, nranks, collective, sizes, dtype, algo, redop, root, per_rank)


def _mpi_times(nranks: int, *args: Any) -> list[list[Sample]]:
    mpiexec = mpiexec_path()
    if mpiexec is None:
        raise TransportError("no mpiexec found (pip install mpich mpi4py)", source="mpi")
    proc = subprocess.run(
        [
            mpiexec,
            "-n",
            str(nranks),
            sys.executable,
            "-m",
            "scaleup.runtime.measure",
            json.dumps(args),
        ],
        capture_output=True,
        text=True,
        timeout=1800,
        check=False,
    )
    if proc.returncode != 0:
        raise TransportError(
            f"mpiexec failed ({proc.returncode}): {proc.stderr.strip()[-500:]}", source="mpi"
        )
    return json.loads(proc.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def _mpi_main(argv: list[str]) -> int:
    """Entry under mpiexec: time the sizes, gather every rank's samples, rank 0 prints JSON."""
    from scaleup import runtime as rt

    args = json.loads(argv[0])
    pg = rt.init(transport="mpi")
    times = _time_sizes(*args)
    gathered = pg.transport.comm.gather(times, root=0)  # type: ignore[attr-defined]
    rt.shutdown()
    if pg.rank == 0:
        sys.stdout.write(json.dumps(gathered) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(_mpi_main(sys.argv[1:]))
