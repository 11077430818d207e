"""Evaluating sweep points: the kind registry, one point into one flat row, failures as data.

A point's ``kind`` names the function that evaluates it through :data:`KINDS` (``"bench"`` -> one
nccl-tests row, ``"plan"`` -> one planner result; see :mod:`scaleup.sweep_kinds`) or directly as
``"package.module:function"``. Kinds travel as import paths, so a worker on another machine
evaluates them the same way and tests can plug in cheap or failing kinds. A point that raises is
a row with ``status="error"``, the error's type and its one-line message.

A batch of points (one Dask task) is evaluated in one :class:`~scaleup.tune.TuneSession`, handed
to every kind function that takes a ``session`` keyword: points of one fabric and collective at
other sizes reuse its compiled and checked schedules, and nothing outlives the batch.
"""

from __future__ import annotations

import functools
import importlib
import inspect
import json
import time
import traceback
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from scaleup.errors import ScaleupError, UsageError
from scaleup.sweep_spec import HIDDEN_POINT_KEYS, canonical, point_id

if TYPE_CHECKING:
    from scaleup.topology import Topology
    from scaleup.tune import TuneSession

__all__ = [
    "KINDS",
    "LEAD_COLUMNS",
    "evaluate_batch",
    "evaluate_point",
    "lost_row",
    "register_kind",
    "topology_of",
]

#: Point kind -> ``"module:function"`` that evaluates it: ``f(point: dict) -> dict`` of results.
KINDS: dict[str, str] = {
    "bench": "scaleup.sweep_kinds:bench_point",
    "plan": "scaleup.sweep_kinds:plan_point",
}
#: Columns every row starts with, whatever its kind.
LEAD_COLUMNS = ("point_id", "kind", "status", "error_type", "error", "elapsed_s")


def register_kind(name: str, target: str) -> None:
    """Name a point kind: ``target`` is ``"module:function"``, importable wherever points run.

    >>> register_kind("doctest-kind", "math:sqrt")
    >>> KINDS.pop("doctest-kind")
    'math:sqrt'
    """
    if ":" not in target:
        raise UsageError(f"kind target {target!r} is not 'module:function'", source=name)
    KINDS[name] = target


@functools.lru_cache(maxsize=256)
def _import_target(target: str) -> Callable[[dict[str, Any]], dict[str, Any]]:
    module, _, attr = target.partition(":")
    func = getattr(importlib.import_module(module), attr, None)
    if not callable(func):
        raise UsageError(f"{target!r} is not a function", source=target)
    return func


def _kind_function(kind: str, kinds: dict[str, str]) -> Callable[[dict[str, Any]], dict[str, Any]]:
    target = kinds.get(kind, kind if ":" in kind else None)
    if target is None:
        raise UsageError(
            f"unknown point kind {kind!r} (one of {', '.join(sorted(kinds))})", source=kind
        )
    return _import_target(target)


@functools.lru_cache(maxsize=64)
def topology_of(label: str, text: str | None = None) -> Topology:
    """The topology of a point, built once per process: ``text`` (an embedded file) or the
    preset spec ``label`` (``"ualink-pod:n=64"``, ``"2xdgx-h100"``)."""
    from scaleup.topology import loads, resolve_topology

    return loads(text, source=label) if text is not None else resolve_topology(label)


def _flatten(result: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """Nested dicts -> dotted columns; lists and tuples -> JSON text (one cell each)."""
    flat: dict[str, Any] = {}
    for key, value in result.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            flat.update(_flatten(value, f"{name}."))
        elif isinstance(value, (list, tuple)):
            flat[name] = json.dumps(value, default=str)
        elif hasattr(value, "item") and callable(value.item):  # numpy scalar
            flat[name] = value.item()
        elif value is None or isinstance(value, (bool, int, float, str)):
            flat[name] = value
        else:
            flat[name] = str(value)
    return flat


def _call(func: Callable[..., dict[str, Any]], point: dict[str, Any], session: Any) -> Any:
    """``func(point)``, with ``session=`` when given and the function takes it."""
    if session is not None and "session" in inspect.signature(func).parameters:
        return func(point, session=session)
    return func(point)


def evaluate_point(
    point: dict[str, Any],
    kinds: dict[str, str] | None = None,
    *,
    session: TuneSession | None = None,
) -> dict[str, Any]:
    """Evaluate one point into one flat row; never raises for a failing point.

    Parameters
    ----------
    point
        A point dict with a ``kind`` key (see :mod:`scaleup.sweep_spec`).
    kinds
        Kind registry to resolve ``point["kind"]`` with (default :data:`KINDS`).
    session
        The tuning session of the batch, for kinds that take one.

    Returns
    -------
    dict
        ``point_id, kind, status ("ok" | "error"), error_type, error, elapsed_s``, the point's
        fields, the result's fields (a point field the result also sets is kept as
        ``requested_<name>``, e.g. ``requested_algo = "tuned"`` next to ``algo = "ring"``), and
        ``point`` (the canonical JSON, to rebuild it).
    """
    kinds = KINDS if kinds is None else kinds
    visible = {k: v for k, v in point.items() if k not in HIDDEN_POINT_KEYS}
    row: dict[str, Any] = {
        "point_id": point_id(point),
        "kind": point.get("kind"),
        "status": "ok",
        "error_type": None,
        "error": None,
        "elapsed_s": 0.0,
    }
    start = time.perf_counter()
    result: dict[str, Any] = {}
    try:
        func = _kind_function(str(point.get("kind")), kinds)
        result = _flatten(_call(func, dict(point), session))
    except Exception as error:  # noqa: BLE001 - a failing point is data, not a crash
        row["status"] = "error"
        row["error_type"] = type(error).__name__
        row["error"] = error.one_line() if isinstance(error, ScaleupError) else _describe(error)
    row["elapsed_s"] = time.perf_counter() - start
    for key, value in visible.items():
        if key == "kind":
            continue
        row[f"requested_{key}" if key in result else key] = value
    row.update({k: v for k, v in result.items() if k not in LEAD_COLUMNS})
    row["point"] = canonical(visible)
    return row


def _describe(error: BaseException) -> str:
    frame = traceback.extract_tb(error.__traceback__)[-1:] if error.__traceback__ else []
    where = f" (at {Path(frame[0].filename).name}:{frame[0].lineno})" if frame else ""
    return f"{error}{where}" if str(error) else f"{type(error).__name__}{where}"


def evaluate_batch(
    points: Sequence[dict[str, Any]], kinds: dict[str, str] | None = None
) -> list[dict[str, Any]]:
    """Evaluate a batch of points in order (one Dask task), in one tuning session."""
    from scaleup.tune import TuneSession

    session = TuneSession()
    return [evaluate_point(p, kinds, session=session) for p in points]


def lost_row(point: dict[str, Any], error: BaseException) -> dict[str, Any]:
    """The row of a point whose whole task failed (a worker died): an error, as if it raised."""
    visible = {k: v for k, v in point.items() if k not in HIDDEN_POINT_KEYS}
    return {
        "point_id": point_id(point),
        "kind": point.get("kind"),
        "status": "error",
        "error_type": type(error).__name__,
        "error": _describe(error),
        "elapsed_s": 0.0,
        **{k: v for k, v in visible.items() if k != "kind"},
        "point": canonical(visible),
    }
