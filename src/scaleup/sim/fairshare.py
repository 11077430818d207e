"""Max-min fair rates by progressive filling, in SimGrid LMM's vocabulary.

A *system* has **constraints** (resources with a capacity: a channel direction, an HBM, a host
memory, a channel's thread block) and **variables** (flows). ``usage[c, v]`` is how many bytes of
constraint ``c``'s capacity one byte/s of variable ``v`` consumes. Each variable stands for
``count[v]`` identical flows (same route, so max-min gives them the same rate) and may carry a
per-flow upper ``bound``.

Progressive filling: raise the rate of every unfrozen flow equally until a constraint saturates
(or a flow hits its bound), freeze the flows crossing it, repeat. The result is the unique max-min
fair allocation: no constraint over capacity, and every flow is bottlenecked by a saturated
constraint on which it has the largest rate (so the allocation is work-conserving).

Multipath as one variable: a transfer split over k equal paths in fixed proportions (1/18 over
18 switch planes) is one variable whose coefficient on each channel is the fraction of its bytes
crossing it. This equals k sub-flows whose rates are tied together (the split is fixed by the
sender, as NVLink's spraying over its links is), not k independent sub-flows; it is exact for the
symmetric fabrics modelled here and k times cheaper.

Solvers are looked up by name in :data:`SOLVERS` (``solver="maxmin"`` by default).

>>> import numpy as np
>>> usage = np.array([[1.0, 1.0, 0.0], [0.0, 1.0, 1.0]])  # flow 1 crosses both channels
>>> maxmin(usage, np.array([10.0, 4.0])).tolist()           # channel 1 saturates first
[8.0, 2.0, 2.0]
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import scipy.sparse as sp

from scaleup.errors import SimulationError, UsageError

__all__ = ["SOLVERS", "Solver", "equal_share", "get_solver", "maxmin", "register_solver"]

Solver = Callable[..., np.ndarray]

#: Relative slack under which a constraint counts as saturated (floating-point rounding of the
#: filling arithmetic, not event ordering; results are still bit-for-bit reproducible).
_SATURATION_RTOL = 1e-9
_DENSE_LIMIT = 1 << 14


def _as_matrix(usage: Any) -> Any:
    if sp.issparse(usage):
        if usage.shape[0] * usage.shape[1] <= _DENSE_LIMIT:
            return np.asarray(usage.toarray(), dtype=np.float64)
        return sp.csr_matrix(usage, dtype=np.float64)
    return np.asarray(usage, dtype=np.float64)


def maxmin(usage: Any, capacity: np.ndarray, *, count: np.ndarray | None = None,
           bound: np.ndarray | None = None) -> np.ndarray:
    """Max-min fair rate of one flow of each variable (bytes/s).

    Parameters
    ----------
    usage
        (constraints x variables) array or scipy sparse matrix, >= 0.
    capacity
        (constraints,) capacities, > 0.
    count
        (variables,) identical flows per variable (default 1).
    bound
        (variables,) per-flow upper bound on the rate (default none).

    Returns
    -------
    numpy.ndarray
        (variables,) rate of each flow; a variable that crosses no constraint and has no bound
        gets ``inf``.
    """
    a = _as_matrix(usage)
    n_c, n_v = a.shape
    cap = np.asarray(capacity, dtype=np.float64)
    if cap.shape != (n_c,):
        raise SimulationError(f"capacity has shape {cap.shape}, want ({n_c},)")
    k = np.ones(n_v) if count is None else np.asarray(count, dtype=np.float64)
    b = np.full(n_v, np.inf) if bound is None else np.asarray(bound, dtype=np.float64)
    at = a.T if not sp.issparse(a) else a.T.tocsr()
    rate = np.zeros(n_v)
    frozen = k <= 0
    remaining = cap.copy()
    level = 0.0
    while not frozen.all():
        weight = np.where(frozen, 0.0, k)
        load = a @ weight
        loaded = load > 0
        steps = np.full(n_c, np.inf)
        steps[loaded] = np.maximum(remaining[loaded], 0.0) / load[loaded]
        bound_steps = np.where(frozen, np.inf, b - level)
        inc = min(steps.min() if n_c else np.inf, bound_steps.min())
        if not np.isfinite(inc):
            rate[~frozen] = np.inf
            break
        level += inc
        remaining -= load * inc
        saturated = loaded & (remaining <= _SATURATION_RTOL * cap)
        touched = (at @ saturated.astype(np.float64)) > 0
        at_bound = np.isfinite(b) & (b - level <= _SATURATION_RTOL * np.abs(b))
        newly = ~frozen & (touched | at_bound)
        if not newly.any():  # rounding left no constraint exactly saturated: take the tightest
            newly = ~frozen & (at @ (loaded & (steps == steps.min())).astype(np.float64) > 0)
        rate[newly] = level
        frozen |= newly
    return rate


def equal_share(usage: Any, capacity: np.ndarray, *, count: np.ndarray | None = None,
                bound: np.ndarray | None = None) -> np.ndarray:
    """Each flow gets, on every constraint it crosses, capacity / flows there; its rate is the
    smallest of those. Not work-conserving (a flow limited elsewhere leaves capacity unused);
    kept as the naive baseline that ``maxmin`` improves on."""
    a = _as_matrix(usage)
    k = np.ones(a.shape[1]) if count is None else np.asarray(count, dtype=np.float64)
    load = a @ k
    share = np.where(load > 0, np.asarray(capacity, dtype=np.float64) / np.where(load > 0, load, 1.0), np.inf)
    dense = a.toarray() if sp.issparse(a) else a
    per = np.where(dense > 0, share[:, None], np.inf).min(axis=0) if dense.size else np.full(a.shape[1], np.inf)
    if bound is not None:
        per = np.minimum(per, bound)
    return per


#: Named fair-sharing solvers (``solver=`` keyword of :func:`scaleup.sim.simulate`).
SOLVERS: dict[str, Solver] = {"maxmin": maxmin, "equal_share": equal_share}


def register_solver(name: str, solver: Solver) -> None:
    """Add a solver under ``name`` (same signature as :func:`maxmin`)."""
    SOLVERS[name] = solver


def get_solver(name: str) -> Solver:
    """The solver called ``name``; :class:`~scaleup.errors.UsageError` if unknown."""
    try:
        return SOLVERS[name]
    except KeyError:
        raise UsageError(f"unknown solver {name!r}; known: {', '.join(SOLVERS)}", source="solver") from None
