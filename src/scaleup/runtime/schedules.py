"""Which Schedule a runtime collective executes, and whether it may run in place.

Every schedule comes from the algorithm library (:mod:`scaleup.collectives.algorithms`), the one
the verifier and the simulator use: the runtime has no algorithms of its own. ``algo`` is an
algorithm name, optionally with parameters as ``name:key=value,...`` (``direct:shot=2``,
``hierarchical:ranks_per_node=2``), as topology presets take theirs. The default is ``direct``,
whose all_reduce is one-shot up to
:data:`~scaleup.collectives.algorithms.direct.ONE_SHOT_MAX_BYTES` per rank buffer and two-shot
above; the runtime knows the dtype, so it counts real bytes
(:func:`~scaleup.collectives.algorithms.direct.auto_shot`).

Before a schedule runs for the first time it is verified (a schedule that fails verification is
never executed), and its ops must follow their dependencies in id order (every executor walks
them in that order).

In place (torch semantics: ``all_reduce(x)`` overwrites ``x``) means input and output are the same
memory. :func:`in_place_safe` asks the verifier, ``verify(schedule, in_place=True)``: a replay
with the two aliased, doing what every transport does per op
(:mod:`scaleup.collectives.semantics`: read every operand, then write), that raises on any hazard
the aliasing creates. The runtime aliases only schedules that pass; the others run with the
output in a workspace.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

import numpy as np

from scaleup.collectives.algorithms import build_schedule
from scaleup.collectives.algorithms.direct import auto_shot
from scaleup.collectives.schedule import Schedule
from scaleup.collectives.spec import CollectiveSpec
from scaleup.collectives.verify import verify
from scaleup.errors import ScheduleError, UsageError

__all__ = [
    "DEFAULT_ALGORITHM",
    "check_id_order",
    "in_place_safe",
    "parse_algorithm",
    "select_schedule",
]

#: The algorithm of a collective called without ``algo=``.
DEFAULT_ALGORITHM = "direct"
#: Above this many elements the checks run on the same algorithm at a small count.
_REPLAY_COUNT = 1 << 16


def parse_algorithm(algo: str | None) -> tuple[str, dict[str, Any]]:
    """``"ring:channels=2,chunks=4"`` -> ``("ring", {"channels": 2, "chunks": 4})``.

    Values are integers or ``true``/``false`` where they read as one, else strings; None is the
    default algorithm.

    >>> parse_algorithm("hierarchical:ranks_per_node=2")
    ('hierarchical', {'ranks_per_node': 2})
    """
    name, _, text = (algo or DEFAULT_ALGORITHM).partition(":")
    params: dict[str, Any] = {}
    for item in filter(None, (p.strip() for p in text.split(","))):
        key, sep, raw = (part.strip() for part in item.partition("="))
        if not sep or not key:
            raise UsageError(
                f"algorithm parameter {item!r} is not key=value (as in ring:channels=2)",
                source="algo",
            )
        params[key] = _value(raw)
    return name.strip(), params


def _value(raw: str) -> int | bool | str:
    if raw.lower() in ("true", "false"):
        return raw.lower() == "true"
    return int(raw) if raw.lstrip("-").isdigit() else raw


def _with_shot(
    name: str, spec: CollectiveSpec, params: dict[str, Any], itemsize: int
) -> dict[str, Any]:
    """``params`` with direct all_reduce's ``shot="auto"`` resolved in bytes."""
    auto = params.get("shot", "auto") == "auto"
    if name == "direct" and spec.collective == "all_reduce" and auto:
        return {**params, "shot": auto_shot(spec.count, itemsize)}
    return params


def check_id_order(schedule: Schedule) -> None:
    """Raise ScheduleError unless every op comes after its dependencies (executors need it)."""
    t = schedule.table
    owner = np.repeat(np.arange(t.n_ops), t.n_deps)
    bad = np.flatnonzero(t.dep_idx >= owner)
    if len(bad):
        op = int(owner[bad[0]])
        raise ScheduleError(
            f"op {op} depends on op {int(t.dep_idx[bad[0]])}, which is not earlier; the runtime "
            "executes ops in id order",
            op=op,
        )


@lru_cache(maxsize=256)
def select_schedule(spec: CollectiveSpec, algo: str | None, itemsize: int) -> tuple[Schedule, bool]:
    """The schedule to run for ``spec`` and whether it is safe with input aliased to output.

    ``algo``: see :func:`parse_algorithm`. Large specs are checked on a schedule of the same
    algorithm and parameters at a small count (the structure does not depend on the count).

    Raises
    ------
    UsageError, UnsupportedCollective
        Unknown algorithm or parameter; an algorithm that cannot run ``spec``.
    ScheduleError
        The schedule fails verification, or lists an op before one of its dependencies.
    """
    name, params = parse_algorithm(algo)
    params = _with_shot(name, spec, params, itemsize)
    schedule = build_schedule(name, spec, **params)
    check_id_order(schedule)
    check = schedule
    if spec.input_count > _REPLAY_COUNT:
        small = CollectiveSpec(
            spec.collective, spec.nranks, spec.nranks * 97 + 3, spec.root, spec.redop
        )
        check = build_schedule(name, small, **params)
    verify(check, "int64")
    return schedule, in_place_safe(check)


def in_place_safe(schedule: Schedule) -> bool:
    """Whether ``schedule`` stays correct when each rank's output aliases its input.

    True when :func:`~scaleup.collectives.verify.verify` with ``in_place=True`` passes; False for
    a collective whose input and output differ in size.
    """
    spec = schedule.spec
    if spec.input_count != spec.output_count:
        return False
    try:
        verify(schedule, "int64", in_place=True)
    except ScheduleError:
        return False
    return True
