"""The checked set: every structure the search times is verified, and the chosen one exactly.

The search times a candidate on a schedule built at a reference count ``R = n x channels x chunks
x REFERENCE_BLOCKS`` elements and scaled to the requested count (docs/models.md, "From the
requested size to the simulator"). Two checks, both replays on numpy
(:func:`scaleup.collectives.verify.verify`) of the builder run again with the timed schedule's
resolved parameters (``schedule.params``: channels, chunks, ring orders, one- or two-shot):

- **In lanes, before any timing** (:meth:`CheckedSet.check_lanes`): the same structure with
  channels and chunks capped at 2 (the first two ring orders), at an uneven count so that blocks
  of different sizes meet. Channels and chunks are independent lanes of one structure, so this
  exercises every cross-lane dependency a builder writes; a builder that fails it is never
  simulated. It is cheap: one check serves every channel and chunk count.
- **Exact, before a choice is reported** (:meth:`CheckedSet.check_exact`): the timed structure
  itself, at a reduced count ``R / k``, the smallest that splits like the reference (one element
  per block; two or a few where a builder halves blocks: the trees' halves, recursive
  halving). The timed schedule must be the reduced one with every count and offset multiplied
  by ``k``, op for op, rank for rank, dependency for dependency, so each element of the reduced
  schedule stands for ``k`` of the timed one and an elementwise collective is correct for one
  exactly when it is for the other. A chosen structure that fails is dropped and the choice is
  made again without it. Verdict ``"exact"``.

A replay's cost follows its *operands* (every op's sources and destinations: each is a shadow
lookup, a hazard check and a slice, ~3 us here), not its ops: an in-switch op over an NVL72 rack
has 144 of them, a ring step 2. The exact check is left out above :data:`VERIFY_MAX_OPERANDS`
(200,000: the 100,000 two-operand ops of a 128-rank ring with 4 channels, the budget once counted
in ops): verdict ``"lanes"``. The lanes check, which every timed structure must pass, keeps its
budget of :data:`VERIFY_MAX_OPS` ops; where even the lanes structure exceeds it (a 1024-rank
ring), nothing is replayed: verdict ``"unchecked"``. The verdict travels with the choice
(:attr:`scaleup.tune.search.TunedChoice.verification`).
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import replace
from typing import Any

import numpy as np

from scaleup.collectives.algorithms import build_schedule
from scaleup.collectives.schedule import Schedule
from scaleup.collectives.verify import verify

__all__ = [
    "REFERENCE_BLOCKS",
    "VERIFY_MAX_OPERANDS",
    "VERIFY_MAX_OPS",
    "CheckedSet",
    "is_scaled_copy",
    "operands",
    "reduced_copy",
]

#: Elements per (rank, channel, chunk) block of the reference schedule that sizes are scaled from.
REFERENCE_BLOCKS = 1024
#: Largest structure (operands: sources and destinations of all ops) replayed exactly; larger
#: ones are checked in lanes (module docstring).
VERIFY_MAX_OPERANDS = 200_000
#: Largest lanes structure (ops) replayed; larger ones are unchecked (module docstring).
VERIFY_MAX_OPS = 100_000

#: Op-table columns that must be equal, and those that must scale with the count.
_SAME = ("kind", "rank", "channel", "step", "src_ptr", "src_rank", "src_buffer", "dst_ptr",
         "dst_rank", "dst_buffer", "dep_ptr", "dep_idx")  # fmt: skip
_SCALED = ("count", "src_offset", "dst_offset")


def is_scaled_copy(small: Schedule, big: Schedule, factor: int) -> bool:
    """Whether ``big`` is ``small`` with every count and offset multiplied by ``factor``.

    >>> from scaleup.collectives.algorithms import build_schedule
    >>> from scaleup.collectives.spec import CollectiveSpec
    >>> ring = lambda count: build_schedule("ring", CollectiveSpec("all_reduce", 4, count))
    >>> is_scaled_copy(ring(4), ring(4096), 1024), is_scaled_copy(ring(4), ring(4097), 1024)
    (True, False)
    """
    a, b = small.table, big.table
    if a.n_ops != b.n_ops or small.spec.count * factor != big.spec.count:
        return False
    return all(np.array_equal(getattr(a, f), getattr(b, f)) for f in _SAME) and all(
        np.array_equal(getattr(a, f) * factor, getattr(b, f)) for f in _SCALED
    )


def _rebuild(schedule: Schedule, count: int, **changes: Any) -> Schedule:
    """``schedule``'s algorithm with its resolved parameters (and ``changes``) at ``count``."""
    params = {**schedule.params, **changes}
    return build_schedule(schedule.algorithm, replace(schedule.spec, count=count), **params)


def reduced_copy(timed: Schedule) -> tuple[Schedule, int]:
    """The smallest schedule ``timed`` is a scaled copy of, and the factor: the same algorithm
    and resolved parameters at ``count / k`` for k = 1024, 512, ... (the first that holds)."""
    k = REFERENCE_BLOCKS
    while k > 1:
        if timed.spec.count % k == 0:
            reduced = _rebuild(timed, timed.spec.count // k)
            if is_scaled_copy(reduced, timed, k):
                return reduced, k
        k //= 2
    return timed, 1


def _key(schedule: Schedule, **changes: Any) -> Hashable:
    """Everything a builder's structure depends on except the count (with ``changes`` to its
    parameters: the key of the schedule :func:`_rebuild` makes, without building it)."""
    spec = schedule.spec
    merged = {**schedule.params, **changes}
    params = tuple(sorted((k, _frozen(v)) for k, v in merged.items()))
    return (schedule.algorithm, spec.collective, spec.nranks, spec.root, spec.redop, params)


def _frozen(value: Any) -> Hashable:
    if isinstance(value, (list, tuple)):
        return tuple(_frozen(v) for v in value)
    return value  # type: ignore[no-any-return]


class CheckedSet:
    """The structures checked so far (module docstring), by structure: algorithm, collective,
    world size, root, redop and resolved parameters (everything but the count), so one check
    serves every topology and size the structure is timed at."""

    def __init__(self) -> None:
        self._verdicts: dict[Hashable, str] = {}

    def __len__(self) -> int:
        return len(self._verdicts)

    def check_lanes(self, timed: Schedule) -> str:
        """Replay ``timed``'s structure in lanes: ``"lanes"``, or ``"unchecked"`` when even that
        is too large to replay; raises the ScheduleError of a wrong structure."""
        count, changes = _lanes(timed)
        key = (_key(timed, **changes), "lanes")  # known before the lanes structure is built
        if key not in self._verdicts:
            lanes = _rebuild(timed, count, **changes)
            small = lanes.n_ops <= VERIFY_MAX_OPS
            if small:
                verify(lanes, dtype=_dtype(timed))
            self._verdicts[key] = "lanes" if small else "unchecked"
        return self._verdicts[key]

    def check_exact(self, timed: Schedule) -> str:
        """Replay ``timed``'s own structure at a reduced count: ``"exact"``; beyond
        :data:`VERIFY_MAX_OPERANDS` operands the lanes verdict. Raises the ScheduleError of a
        wrong one."""
        if operands(timed) > VERIFY_MAX_OPERANDS:
            return self.check_lanes(timed)
        key = (_key(timed), "exact")
        if key not in self._verdicts:
            verify(reduced_copy(timed)[0], dtype=_dtype(timed))
            self._verdicts[key] = "exact"
        return self._verdicts[key]


def operands(schedule: Schedule) -> int:
    """What replaying ``schedule`` costs: the sources and destinations of all its ops."""
    t = schedule.table
    return len(t.src_rank) + len(t.dst_rank)


def _dtype(schedule: Schedule) -> str:
    """Integers replay exactly; a product of integers overflows, so prod replays in floats."""
    return "int32" if schedule.spec.redop != "prod" else "float32"


def _lanes(timed: Schedule) -> tuple[int, dict[str, Any]]:
    """The count and parameter changes of ``timed``'s structure in lanes: channels and chunks
    capped at 2 (the first two ring orders), at an uneven count, so that blocks of different
    sizes meet too."""
    params = timed.params
    lanes, depth = min(int(params.get("channels") or 1), 2), min(int(params.get("chunks", 1)), 2)
    changes: dict[str, Any] = {"channels": lanes, "chunks": depth}
    if params.get("orders") is not None:
        changes["orders"] = params["orders"][:lanes]
    return 2 * timed.spec.nranks * lanes * depth + 1, changes
