"""Evaluating sweep points: one point into one flat row, failures as data.

A point's ``kind`` names the function that evaluates it in the kind registry
(:mod:`scaleup.sweep.kinds`: ``"bench"``, ``"plan"``, kinds registered in code or installed as
entry points); it is a name, never an import path. A point that raises is a row with
``status="error"``, the error's type and its one-line message.

A batch of points (one Dask task) is evaluated in one :class:`~scaleup.tune.TuneSession`, handed
to every kind function that takes a ``session`` keyword: points of one fabric and collective at
other sizes reuse its compiled and checked schedules, and nothing outlives the batch.
"""

from __future__ import annotations

import inspect
import json
import time
import traceback
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from scaleup.errors import ScaleupError, UsageError
from scaleup.sweep.kinds import KindFunction, get_kind
from scaleup.sweep.points import HIDDEN_POINT_KEYS, LEAD_COLUMNS, canonical, point_id
from scaleup.tune import TuneSession

__all__ = ["evaluate_batch", "evaluate_point", "lost_row"]


def _kind_function(kind: Any, kinds: Mapping[str, KindFunction] | None) -> KindFunction:
    if kinds is None:
        return get_kind(kind)
    function = kinds.get(kind) if isinstance(kind, str) else None
    if function is None:
        raise UsageError(
            f"unknown point kind {kind!r} (one of {', '.join(sorted(kinds))})", source="kind"
        )
    return function


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


def _call(func: KindFunction, point: dict[str, Any], session: TuneSession | None) -> Any:
    """``func(point)``, with ``session=`` when given and the function takes it."""
    if session is not None and "session" in inspect.signature(func).parameters:
        return func(point, session=session)  # type: ignore[call-arg]
    return func(point)


def evaluate_point(
    point: dict[str, Any],
    kinds: Mapping[str, KindFunction] | None = None,
    *,
    session: TuneSession | None = None,
) -> dict[str, Any]:
    """Evaluate one point into one flat row; never raises for a failing point.

    Parameters
    ----------
    point
        A point dict with a ``kind`` key (see :mod:`scaleup.sweep.points`).
    kinds
        Kind name -> function to resolve ``point["kind"]`` with (default: the registry,
        :func:`scaleup.sweep.kinds.get_kind`).
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
        result = _flatten(_call(_kind_function(point.get("kind"), kinds), dict(point), session))
    except Exception as error:  # noqa: BLE001 - a failing point is data, not a crash
        row["status"] = "error"
        row["error_type"] = type(error).__name__
        row["error"] = error.one_line() if isinstance(error, ScaleupError) else _describe(error)
    row["elapsed_s"] = time.perf_counter() - start
    for key, value in visible.items():
        if key == "kind":
            continue
        row[f"requested_{key}" if key in result or key in row else key] = value
    row.update({k: v for k, v in result.items() if k not in LEAD_COLUMNS})
    row["point"] = canonical(visible)
    return row


def _describe(error: BaseException) -> str:
    frame = traceback.extract_tb(error.__traceback__)[-1:] if error.__traceback__ else []
    where = f" (at {Path(frame[0].filename).name}:{frame[0].lineno})" if frame else ""
    return f"{error}{where}" if str(error) else f"{type(error).__name__}{where}"


def evaluate_batch(
    points: Sequence[dict[str, Any]], kinds: Mapping[str, KindFunction] | None = None
) -> list[dict[str, Any]]:
    """Evaluate a batch of points in order (one Dask task), in one tuning session."""
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
