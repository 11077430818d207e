"""Design-space sweeps: evaluate many small, pure points on dask.distributed, resumably.

A point is a JSON-able dict (see :mod:`scaleup.sweep_spec`); :func:`evaluate_point` turns it into
one flat result row, whatever its kind (:mod:`scaleup.sweep_eval`: ``"bench"``, ``"plan"``, or
any ``"module:function"``).

Where the points run follows Dask's own default: no argument starts a ``LocalCluster`` (one
single-threaded worker process per core), ``scheduler="tcp://host:8786"`` connects to a running
one (``Client(address)``), an existing ``client=`` is used as is, and ``serial=True`` uses no Dask
at all. Points travel in batches (tens per task) so per-task overhead does not dominate cheap
points. Rows are written as soon as tasks finish (:class:`~scaleup.sweep_store.ResultStore`), so
``resume=True`` after a Ctrl-C or a kill evaluates only what is missing. A point that raises is a
row with ``status="error"`` and the error; the sweep goes on.
"""

from __future__ import annotations

import contextlib
import logging
import math
import os
import signal
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from scaleup.errors import UsageError
from scaleup.sweep_eval import (
    KINDS,
    evaluate_batch,
    evaluate_point,
    lost_row,
    register_kind,
    topology_of,
)
from scaleup.sweep_spec import point_id
from scaleup.sweep_store import ResultStore

if TYPE_CHECKING:
    from distributed import Client

__all__ = [
    "KINDS",
    "SweepProgress",
    "SweepSummary",
    "evaluate_batch",
    "evaluate_point",
    "register_kind",
    "run_sweep",
    "topology_of",
]

#: Points per Dask task at most: enough to hide the ~ms of scheduling per task.
MAX_BATCH = 100
#: A serial sweep writes its finished rows at least this often (seconds; and every
#: ``batch_size`` points). A Dask sweep writes whatever tasks have finished, as they finish.
FLUSH_S = 0.5


@dataclass(frozen=True)
class SweepProgress:
    """Where a sweep stands: ``done`` of ``total`` points (``resumed`` of them from an earlier
    run), ``errors`` among those evaluated now, ``elapsed_s`` since this run started."""

    done: int
    total: int
    resumed: int
    errors: int
    elapsed_s: float


@dataclass(frozen=True)
class SweepSummary:
    """What a sweep did: points in the spec, found already done, evaluated now, failed now."""

    output: str
    total: int
    resumed: int
    evaluated: int
    errors: int
    pending: int
    wall_s: float
    mode: str
    workers: int
    batch_size: int

    def to_dict(self) -> dict[str, Any]:
        """The summary as a plain dict (the ``--json`` form)."""
        return asdict(self)


def default_batch_size(n_points: int, n_workers: int) -> int:
    """Points per task: about four tasks per worker for balance, at most :data:`MAX_BATCH`.

    >>> default_batch_size(2000, 2), default_batch_size(12, 2)
    (100, 2)
    """
    return max(1, min(MAX_BATCH, math.ceil(n_points / (4 * max(n_workers, 1)))))


def _unique(points: Sequence[dict[str, Any]]) -> tuple[list[dict[str, Any]], list[str]]:
    seen: dict[str, dict[str, Any]] = {}
    for point in points:
        seen.setdefault(point_id(point), point)
    return list(seen.values()), list(seen)


def run_sweep(
    points: Sequence[dict[str, Any]],
    output: str | Path,
    *,
    scheduler: str | None = None,
    client: Client | None = None,
    serial: bool = False,
    n_workers: int | None = None,
    processes: bool = True,
    resume: bool = False,
    overwrite: bool = False,
    retry_errors: bool = False,
    batch_size: int | None = None,
    max_points: int | None = None,
    progress: Callable[[SweepProgress], None] | None = None,
    kinds: dict[str, str] | None = None,
) -> SweepSummary:
    """Evaluate every point of a sweep and write the rows to ``output`` as they finish.

    Parameters
    ----------
    points
        Point dicts (:func:`scaleup.sweep_spec.expand_spec`); repeated points run once.
    output
        ``*.parquet`` (a Parquet dataset directory) or ``*.csv``.
    scheduler
        Address of a running Dask scheduler (``tcp://host:8786``); default: a ``LocalCluster``.
    client
        An existing ``distributed.Client`` to use (not closed afterwards).
    serial
        Evaluate in this process, without Dask.
    n_workers, processes
        The ``LocalCluster``: worker count (default: the cores) and whether they are processes.
    resume
        Keep the rows already at ``output`` and evaluate only the missing points.
    overwrite
        Replace an existing ``output``. Without ``resume`` or ``overwrite`` it must not exist.
    retry_errors
        With ``resume``: evaluate again the points recorded as errors.
    batch_size
        Points per task (default :func:`default_batch_size`).
    max_points
        Evaluate at most this many of the missing points (then stop, resumable).
    progress
        Called with a :class:`SweepProgress` at the start and as rows finish; it may raise
        (e.g. ``KeyboardInterrupt``) to stop the sweep, which keeps every finished row.
    kinds
        Kind registry (default :data:`KINDS`), sent with every task.

    Returns
    -------
    SweepSummary

    Raises
    ------
    UsageError
        ``output`` exists (without ``resume``/``overwrite``), or conflicting options.
    """
    if serial and (scheduler or client):
        raise UsageError("serial=True runs without Dask; drop scheduler/client", source="--serial")
    if scheduler and client:
        raise UsageError("give a scheduler address or a client, not both", source="--scheduler")
    kinds = dict(KINDS if kinds is None else kinds)
    store = ResultStore(output)
    if store.exists() and not resume:
        if not overwrite:
            raise UsageError(
                "already exists; use --resume to continue it or --force to replace it",
                source=str(output),
            )
        store.clear()
    unique, ids = _unique(points)
    finished = store.finished(include_errors=not retry_errors) if resume else set()
    todo = [p for p, i in zip(unique, ids, strict=True) if i not in finished]
    resumed = len(unique) - len(todo)
    if max_points is not None:
        todo = todo[: max(max_points, 0)]
    start = time.perf_counter()
    state = {"done": resumed, "errors": 0}

    def report(rows: list[dict[str, Any]]) -> None:
        state["done"] += len(rows)
        state["errors"] += sum(r["status"] != "ok" for r in rows)
        if progress is not None:
            progress(
                SweepProgress(
                    state["done"],
                    len(unique),
                    resumed,
                    state["errors"],
                    time.perf_counter() - start,
                )
            )

    def finish(rows: list[dict[str, Any]]) -> None:
        store.append(rows)  # on disk before anyone hears of it: a Ctrl-C now loses nothing
        report(rows)

    report([])
    mode, workers = ("serial" if serial else "nothing left to run"), 1
    if serial or not todo:
        from scaleup.tune import TuneSession

        size = batch_size or MAX_BATCH
        rows: list[dict[str, Any]] = []
        last, session = time.monotonic(), TuneSession()  # one tuning session per batch
        try:
            for point in todo:
                rows.append(evaluate_point(point, kinds, session=session))
                if len(rows) >= size or time.monotonic() - last >= FLUSH_S:
                    batch, rows, last, session = rows, [], time.monotonic(), TuneSession()
                    finish(batch)
        except BaseException:
            store.append(rows)  # Ctrl-C between writes: keep what finished
            raise
        finish(rows)
    else:
        mode, workers, size = _run_dask(
            todo,
            kinds,
            finish,
            scheduler=scheduler,
            client=client,
            n_workers=n_workers,
            processes=processes,
            batch_size=batch_size,
        )
    evaluated = state["done"] - resumed
    if resumed + evaluated == len(unique):
        store.compact()
    return SweepSummary(
        output=str(output),
        total=len(unique),
        resumed=resumed,
        evaluated=evaluated,
        errors=state["errors"],
        pending=len(unique) - resumed - evaluated,
        wall_s=time.perf_counter() - start,
        mode=mode,
        workers=workers,
        batch_size=size,
    )


def _chunks(items: Sequence[dict[str, Any]], size: int) -> list[list[dict[str, Any]]]:
    return [list(items[i : i + size]) for i in range(0, len(items), max(size, 1))]


def _run_dask(
    todo: list[dict[str, Any]],
    kinds: dict[str, str],
    finish: Callable[[list[dict[str, Any]]], None],
    *,
    scheduler: str | None,
    client: Client | None,
    n_workers: int | None,
    processes: bool,
    batch_size: int | None,
) -> tuple[str, int, int]:
    from distributed import Client, LocalCluster, as_completed

    own: list[Any] = []  # what this call started, closed in reverse on the way out
    try:
        if client is None and scheduler:
            client = Client(scheduler, set_as_default=False)
            own.append(client)
            mode = f"scheduler {scheduler}"
        elif client is None:
            with (
                _deferred_interrupt()
            ):  # a Ctrl-C mid-start would leave a half-built cluster behind
                cluster = LocalCluster(
                    n_workers=n_workers or os.cpu_count() or 1,
                    threads_per_worker=1,
                    processes=processes,
                    silence_logs=logging.ERROR,
                    dashboard_address=None,
                )
                own.append(cluster)
                client = Client(cluster, set_as_default=False)
                own.append(client)
            mode = "local cluster"
        else:
            mode = "client"
        workers = max(
            1, sum(w.get("nthreads", 1) for w in client.scheduler_info()["workers"].values())
        )
        size = batch_size or default_batch_size(len(todo), workers)
        batches = _chunks(todo, size)
        futures = client.map(evaluate_batch, batches, kinds=kinds, pure=False)
        batch_of = {f.key: b for f, b in zip(futures, batches, strict=True)}
        try:
            # batches(): every task finished since the last write, written together.
            for done in as_completed(futures, loop=client.loop).batches():
                rows: list[dict[str, Any]] = []
                for future in done:
                    try:
                        rows += future.result()
                    except Exception as error:  # noqa: BLE001 - a lost task fails its points, not the sweep
                        rows += [lost_row(p, error) for p in batch_of[future.key]]
                finish(rows)
        finally:
            client.cancel(futures)
        return mode, workers, size
    finally:
        for thing in reversed(own):
            thing.close()


@contextlib.contextmanager
def _deferred_interrupt() -> Iterator[None]:
    """Hold a Ctrl-C (SIGINT) until the block is done, then raise it (main thread only)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    caught: list[int] = []
    previous = signal.signal(signal.SIGINT, lambda signum, frame: caught.append(signum))
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
    if caught:
        raise KeyboardInterrupt
