"""Design-space sweeps: evaluate many small, pure points on dask.distributed, resumably.

A point is a JSON-able dict (see :mod:`scaleup.sweep.points`); :func:`evaluate_point` turns it into
one flat result row, whatever its kind (a name in the registry of :mod:`scaleup.sweep.kinds`:
``"bench"``, ``"plan"``, kinds registered in code or installed as entry points).

Where the points run follows Dask's own default: no argument starts a ``LocalCluster`` (one
single-threaded worker process per core), ``scheduler="tcp://host:8786"`` connects to a running
one (``Client(address)``), an existing ``client=`` is used as is, and ``serial=True`` uses no Dask
at all. Points travel in batches (tens per task) so per-task overhead does not dominate cheap
points. Rows are written as soon as tasks finish (:class:`~scaleup.sweep.store.ResultStore`), so
``resume=True`` after a Ctrl-C or a kill evaluates only what is missing. A point that raises is a
row with ``status="error"`` and the error; the sweep goes on. A stopped sweep raises
:class:`SweepStopped` (a ``KeyboardInterrupt``) saying how many points are saved.
"""

from __future__ import annotations

import contextlib
import logging
import math
import os
import signal
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from scaleup.errors import UsageError
from scaleup.sweep.evaluate import evaluate_batch, evaluate_point, lost_row
from scaleup.sweep.kinds import KindFunction, declared_columns, resolve_kinds
from scaleup.sweep.points import point_id
from scaleup.sweep.progress import SweepProgress, SweepSummary, Tally, cost_class
from scaleup.sweep.schema import sweep_schema
from scaleup.sweep.store import ResultStore
from scaleup.tune import TuneSession

if TYPE_CHECKING:
    from distributed import Client

__all__ = ["SweepProgress", "SweepStopped", "SweepSummary", "default_batch_size", "run_sweep"]

#: Points per Dask task at most: enough to hide the ~ms of scheduling per task.
MAX_BATCH = 100
#: How long connecting to a ``scheduler=`` address may take (seconds) before the sweep gives up
#: with one line; Dask's own default, 30 s, is long to wait for a typo.
CONNECT_TIMEOUT_S = 3.0
#: A serial sweep writes its finished rows at least this often (seconds; and every
#: ``batch_size`` points). A Dask sweep writes whatever tasks have finished, as they finish.
FLUSH_S = 0.5


class SweepStopped(KeyboardInterrupt):
    """A sweep stopped early (Ctrl-C, SIGTERM, or a progress callback that raised
    ``KeyboardInterrupt``): ``saved`` of ``total`` points are on disk at ``output``."""

    def __init__(self, saved: int, total: int, output: str) -> None:
        super().__init__(f"{saved} of {total} points are saved in {output}")
        self.saved = saved
        self.total = total
        self.output = output


def default_batch_size(n_points: int, n_workers: int) -> int:
    """Points per task: about four tasks per worker for balance, at most :data:`MAX_BATCH`.

    >>> default_batch_size(2000, 2), default_batch_size(12, 2)
    (100, 2)
    """
    return max(1, min(MAX_BATCH, math.ceil(n_points / (4 * max(n_workers, 1)))))


def _unique(points: Sequence[dict[str, Any]]) -> tuple[list[dict[str, Any]], list[str]]:
    seen: dict[str, dict[str, Any]] = {}
    for i, point in enumerate(points):
        try:
            seen.setdefault(point_id(point), point)
        except (TypeError, ValueError, AttributeError) as error:
            raise UsageError(f"point {i} is not plain data: {error}", source="points") from None
    return list(seen.values()), list(seen)


@dataclass(frozen=True)
class _Placement:
    """Where the points run: this process, a scheduler's cluster, a client's, or a local one."""

    scheduler: str | None
    client: Client | None
    serial: bool
    n_workers: int | None
    processes: bool
    batch_size: int | None

    def __post_init__(self) -> None:
        """Refuse conflicting choices before anything is read or written."""
        if self.serial and (self.scheduler or self.client):
            raise UsageError(
                "serial=True runs without Dask; drop scheduler/client", source="--serial"
            )
        if self.scheduler and self.client:
            raise UsageError("give a scheduler address or a client, not both", source="--scheduler")

    @contextlib.contextmanager
    def connected(self, timeout_s: float) -> Iterator[Client | None]:
        """The client of ``scheduler``, connected now (so an address that does not answer is
        one error before anything runs) and closed at the end; else ``client`` as is."""
        if not self.scheduler:
            yield self.client
            return
        from distributed import Client

        client = _connect(Client, self.scheduler, timeout_s)
        try:
            yield client
        finally:
            client.close()

    def run(
        self,
        todo: list[dict[str, Any]],
        kinds: Mapping[str, KindFunction],
        tally: Tally,
        client: Client | None,
    ) -> tuple[str, int, int]:
        """Evaluate ``todo`` there (on ``client``, if any); return the mode, worker count and
        batch size it used."""
        if self.serial or not todo:
            size = self.batch_size or MAX_BATCH
            _run_serial(todo, kinds, size, tally)
            return ("serial" if self.serial else "nothing left to run"), 1, size
        return _run_dask(
            todo,
            kinds,
            tally,
            mode=f"scheduler {self.scheduler}" if self.scheduler else "client",
            client=client,
            n_workers=self.n_workers,
            processes=self.processes,
            batch_size=self.batch_size,
        )


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
    kinds: Mapping[str, KindFunction] | None = None,
    provenance: Mapping[str, str] | None = None,
    connect_timeout_s: float = CONNECT_TIMEOUT_S,
) -> SweepSummary:
    """Evaluate every point of a sweep and write the rows to ``output`` as they finish.

    ``points`` are point dicts (:func:`scaleup.sweep.expand.expand_spec`; a repeated point runs
    once); ``output`` is ``*.parquet`` (a Parquet dataset directory) or ``*.csv``. They run on the
    Dask scheduler at ``scheduler`` (``tcp://host:8786``), on an existing ``client`` (not closed
    afterwards), in this process without Dask (``serial``), or else on a ``LocalCluster`` of
    ``n_workers`` (default: the cores), processes unless ``processes`` is false; ``batch_size``
    points per task (default :func:`default_batch_size`). ``resume`` keeps the rows already at
    ``output`` and evaluates only the missing points (with ``retry_errors``, those recorded as
    errors again); ``overwrite`` replaces an existing ``output``, which without either must not
    exist. ``max_points``: evaluate at most this many of the missing points (then stop,
    resumable). ``progress`` is called with a :class:`SweepProgress` at the start and as rows
    finish; it may raise ``KeyboardInterrupt`` to stop the sweep, which keeps every finished row.
    ``kinds``: kind name -> function (default: the registry, :mod:`scaleup.sweep.kinds`); the
    functions the points use are sent with every task. ``provenance`` (spec path, version, date)
    is recorded with a Parquet dataset for the report. ``connect_timeout_s``: how long to try
    to reach ``scheduler`` (before any point runs).

    Raises :class:`UsageError` if ``output`` exists (without ``resume``/``overwrite``) or holds
    something a sweep did not write, for a point of an unknown kind, for conflicting options, or
    when ``scheduler`` does not answer within ``connect_timeout_s``;
    :class:`SweepStopped` when interrupted (the points finished so far are saved).
    """
    where = _Placement(scheduler, client, serial, n_workers, processes, batch_size)
    unique, ids = _unique(points)
    used = resolve_kinds((p.get("kind") for p in unique), kinds)
    store = ResultStore(output)
    schema = sweep_schema(unique, {name: declared_columns(f) for name, f in used.items()})
    store.prepare(resume=resume, overwrite=overwrite, schema=schema, provenance=provenance)
    finished = store.finished(include_errors=not retry_errors) if resume else set()
    pending = [(p, i) for p, i in zip(unique, ids, strict=True) if i not in finished]
    resumed = len(unique) - len(pending)
    if max_points is not None:
        pending = pending[: max(max_points, 0)]
    todo = [p for p, _ in pending]
    classes = {i: cost_class(p) for p, i in pending}
    tally = Tally(store, str(output), len(unique), resumed, progress, classes)
    with where.connected(connect_timeout_s) as connected:
        try:
            tally.report([])
            mode, workers, size = where.run(todo, used, tally, connected)
        except KeyboardInterrupt as stop:
            if isinstance(stop, SweepStopped):
                raise
            raise SweepStopped(tally.saved, tally.total, str(output)) from None
    return tally.summary(mode, workers, size)


def _run_serial(
    todo: list[dict[str, Any]], kinds: Mapping[str, KindFunction], size: int, tally: Tally
) -> None:
    """Evaluate ``todo`` here, saving rows every ``size`` points or :data:`FLUSH_S` seconds."""
    tally.begin()
    rows: list[dict[str, Any]] = []
    last, session = time.monotonic(), TuneSession()  # one tuning session per batch
    try:
        for point in todo:
            rows.append(evaluate_point(point, kinds, session=session))
            if len(rows) >= size or time.monotonic() - last >= FLUSH_S:
                batch, rows, last, session = rows, [], time.monotonic(), TuneSession()
                tally.finish(batch)
    except BaseException:
        tally.save(rows)  # Ctrl-C between writes: keep what finished
        raise
    tally.finish(rows)


def _chunks(items: Sequence[dict[str, Any]], size: int) -> list[list[dict[str, Any]]]:
    return [list(items[i : i + size]) for i in range(0, len(items), max(size, 1))]


def _run_dask(
    todo: list[dict[str, Any]],
    kinds: Mapping[str, KindFunction],
    tally: Tally,
    *,
    mode: str,
    client: Client | None,
    n_workers: int | None,
    processes: bool,
    batch_size: int | None,
) -> tuple[str, int, int]:
    from distributed import Client, LocalCluster, as_completed

    own: list[Any] = []  # what this call started, closed in reverse on the way out
    try:
        if client is None:
            # A Ctrl-C or SIGTERM mid-start would leave a half-built cluster behind, which
            # distributed then tries to close at exit, with a traceback.
            with _deferred_interrupt():
                cluster = LocalCluster(
                    n_workers=n_workers or os.cpu_count() or 1,
                    threads_per_worker=1,
                    processes=processes,
                    # A worker that loses its scheduler at shutdown logs an ERROR traceback.
                    silence_logs=logging.CRITICAL,
                    dashboard_address=None,
                )
                own.append(cluster)
                client = Client(cluster, set_as_default=False)
                own.append(client)
            mode = "local cluster"
        workers = max(
            1, sum(w.get("nthreads", 1) for w in client.scheduler_info()["workers"].values())
        )
        size = batch_size or default_batch_size(len(todo), workers)
        batches = _chunks(todo, size)
        tally.begin()
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
                tally.finish(rows)
        finally:
            client.cancel(futures)
        return mode, workers, size
    finally:
        for thing in reversed(own):
            thing.close()


def _connect(client_class: Any, address: str, timeout_s: float) -> Any:
    """``Client(address)``, giving up after ``timeout_s``; an address that does not work is a
    one-line error.

    The address is checked first: a ``Client`` whose constructor fails on a malformed one is
    left half-built, and its finalizer prints a traceback at exit.
    """
    from distributed.comm import resolve_address

    try:
        resolve_address(address)
        return client_class(address, timeout=timeout_s, set_as_default=False)
    except (OSError, ValueError, TypeError) as error:  # refused, timed out, not an address
        why = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        raise UsageError(f"cannot connect to the Dask scheduler: {why}", source=address) from None


@contextlib.contextmanager
def _deferred_interrupt() -> Iterator[None]:
    """Hold SIGINT and SIGTERM until the block is done, then hand them to the handlers they
    would have reached (main thread only; a signal with no Python handler is left alone)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    caught: list[int] = []
    previous: dict[int, Any] = {}
    for held in (signal.SIGINT, signal.SIGTERM):
        if callable(signal.getsignal(held)):
            previous[held] = signal.signal(held, lambda sig, frame: caught.append(sig))
    try:
        yield
    finally:
        for restored, handler in previous.items():
            signal.signal(restored, handler)
    for signum in dict.fromkeys(caught):
        previous[signum](signum, None)
