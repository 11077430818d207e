"""Where a sweep stands: its running tally, the progress it reports and its summary; and how
long it has left when its points cost very different times.

Points are grouped into *cost classes* (:func:`cost_class`: the kind and the topology, so a
1024-rank fabric is not averaged with an 8-rank one). Each remaining point is expected to cost
the mean evaluation time (the rows' ``elapsed_s``) of the finished points of its class, or, for a
class with none finished yet, the mean over every finished point. The remaining work is then
turned into wall time by the rate the sweep has shown so far, ``elapsed_s / work done``, which
takes in however many workers run in parallel and whatever overhead they pay
(:func:`estimate_remaining_s`); ``elapsed_s`` counts from when points started running
(:meth:`Tally.begin`), so the seconds a local cluster takes to start do not inflate it.
Counting points alone (rich's default) says "five seconds" when five 10-second points follow a
hundred cheap ones.
"""

from __future__ import annotations

import collections
import time
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from scaleup.sweep.store import ResultStore

__all__ = ["SweepProgress", "SweepSummary", "Tally", "cost_class", "estimate_remaining_s"]


@dataclass(frozen=True)
class SweepProgress:
    """Where a sweep stands: ``done`` of ``total`` points (``resumed`` of them from an earlier
    run), ``errors`` among those evaluated now, ``elapsed_s`` since this run started, and
    ``eta_s``, the seconds left by :func:`estimate_remaining_s` (None before the first point
    of this run finished)."""

    done: int
    total: int
    resumed: int
    errors: int
    elapsed_s: float
    eta_s: float | None = None


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
    damaged: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """The summary as a plain dict (the ``--json`` form)."""
        return asdict(self)


class Tally:
    """A sweep's running counts: rows saved to the store first, then told to ``progress``."""

    def __init__(
        self,
        store: ResultStore,
        output: str,
        total: int,
        resumed: int,
        progress: Callable[[SweepProgress], None] | None,
        classes: Mapping[str, str],
    ) -> None:
        self.store, self.output, self.progress = store, output, progress
        self.total, self.resumed = total, resumed
        self.done = self.saved = resumed
        self.errors = 0
        self.start = self.began = time.perf_counter()
        self.classes = classes  # point id -> cost class, of the points to run
        self.left = collections.Counter(classes.values())
        self.cost: dict[str, tuple[int, float]] = {}

    def begin(self) -> None:
        """Points start running now (a cluster is up): the ETA's rate counts from here."""
        self.began = time.perf_counter()

    def report(self, rows: list[dict[str, Any]]) -> None:
        """Count ``rows`` as done and tell the progress callback where the sweep stands."""
        self.done += len(rows)
        self.errors += sum(r["status"] != "ok" for r in rows)
        for row in rows:
            name = self.classes.get(row["point_id"], "")
            self.left[name] -= 1
            count, seconds = self.cost.get(name, (0, 0.0))
            self.cost[name] = (count + 1, seconds + float(row.get("elapsed_s") or 0.0))
        if self.progress is not None:
            now = time.perf_counter()
            elapsed = now - self.start
            left = {name: n for name, n in self.left.items() if n > 0}
            eta = estimate_remaining_s(now - self.began, self.cost, left)
            self.progress(
                SweepProgress(self.done, self.total, self.resumed, self.errors, elapsed, eta)
            )

    def save(self, rows: list[dict[str, Any]]) -> None:
        """Write ``rows`` to the store and count them as saved."""
        self.store.append(rows)  # on disk before anyone hears of it: a Ctrl-C now loses nothing
        self.saved += len(rows)

    def finish(self, rows: list[dict[str, Any]]) -> None:
        """Save ``rows``, then report them."""
        self.save(rows)
        self.report(rows)

    def summary(self, mode: str, workers: int, batch_size: int) -> SweepSummary:
        """Compact the store if every point is done, and say what the sweep did."""
        evaluated = self.done - self.resumed
        if self.resumed + evaluated == self.total:
            self.store.compact()
        return SweepSummary(
            output=self.output,
            total=self.total,
            resumed=self.resumed,
            evaluated=evaluated,
            errors=self.errors,
            pending=self.total - self.resumed - evaluated,
            wall_s=time.perf_counter() - self.start,
            mode=mode,
            workers=workers,
            batch_size=batch_size,
            damaged=list(self.store.damaged),
        )


def cost_class(point: Mapping[str, Any]) -> str:
    """The class of points expected to cost alike: the kind and the topology (label), if any.

    >>> cost_class({"kind": "bench", "topology": "ualink-pod:n=64", "bytes": 8})
    'bench|ualink-pod:n=64'
    >>> cost_class({"kind": "square", "x": 3})
    'square|'
    """
    return f"{point.get('kind')}|{point.get('topology', '')}"


def estimate_remaining_s(
    elapsed_s: float,
    done: Mapping[str, tuple[int, float]],
    remaining: Mapping[str, int],
) -> float | None:
    """Seconds until the ``remaining`` points are done, or None before any point finished.

    Parameters
    ----------
    elapsed_s
        Wall time the sweep has run so far.
    done
        Cost class -> (points finished, their summed evaluation time in seconds).
    remaining
        Cost class -> points still to run.

    >>> estimate_remaining_s(11.0, {"cheap": (10, 1.0), "dear": (1, 10.0)}, {"dear": 5})
    50.0
    """
    count = sum(n for n, _ in done.values())
    work = sum(s for _, s in done.values())
    left = sum(remaining.values())
    if not left:
        return 0.0
    if count == 0 or work <= 0 or elapsed_s <= 0:
        return None
    mean = work / count
    todo = 0.0
    for name, n in remaining.items():
        finished, seconds = done.get(name, (0, 0.0))
        todo += n * (seconds / finished if finished else mean)
    return elapsed_s * todo / work
