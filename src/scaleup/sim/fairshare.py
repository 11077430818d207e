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

import functools
from collections.abc import Callable
from typing import Any, TypeVar, cast

import numpy as np
import scipy.sparse as sp

try:  # the C kernels behind a sparse array's ``@`` (private: the public path stands in)
    from scipy.sparse import _sparsetools
except ImportError:  # pragma: no cover - a scipy that moved them
    _sparsetools = None

from scaleup.errors import SimulationError, UsageError

__all__ = [
    "SOLVERS",
    "Solver",
    "column_classes",
    "equal_share",
    "get_solver",
    "maxmin",
    "maxmin_columns",
    "maxmin_entries",
    "merge_constraints",
    "register_solver",
    "sparse_matvec",
]

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


def maxmin(
    usage: Any,
    capacity: np.ndarray,
    *,
    count: np.ndarray | None = None,
    bound: np.ndarray | None = None,
) -> np.ndarray:
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


_F = TypeVar("_F", bound=Callable[..., Any])


def _quiet_divide(solver: _F) -> _F:
    """``solver`` with numpy's divide-by-zero and invalid warnings off (see :func:`_fill`); a
    fresh ``errstate`` per call, so threads (a Dask sweep's workers) do not share one."""

    @functools.wraps(solver)
    def quiet(*args: Any, **kwargs: Any) -> Any:
        with np.errstate(divide="ignore", invalid="ignore"):
            return solver(*args, **kwargs)

    return cast(_F, quiet)


@_quiet_divide
def maxmin_entries(
    row: np.ndarray, col: np.ndarray, use: np.ndarray, capacity: np.ndarray, count: np.ndarray
) -> np.ndarray:
    """:func:`maxmin` (no bounds) on a usage matrix given as its nonzero entries.

    ``row[e], col[e], use[e]``: entry ``e`` of the (constraints x variables) usage matrix, with
    ``len(capacity)`` constraints and ``len(count)`` variables. The same progressive filling,
    but each round is three ``bincount``/mask passes over the entries of still-unfrozen
    variables (frozen ones are dropped), with no sparse-matrix objects: the simulator's hot path.
    Returns the rate of one flow of each variable (``inf`` for one that crosses nothing).
    """
    cap = np.asarray(capacity, dtype=np.float64)
    n_c, n_v = len(cap), len(count)
    rate = np.full(n_v, np.inf)
    k = np.asarray(count, dtype=np.float64)
    if len(k) and k.min() > 0:  # every variable active (the simulator's case): no filter
        r, c, w = row, col, use * k[col]
    else:
        live = k[col] > 0
        r, c = row[live], col[live]
        w = use[live] * k[c]
    remaining = cap.copy()
    tol = _SATURATION_RTOL * cap
    level = 0.0
    steps = np.empty(n_c)
    while len(r):
        inc, saturated = _fill(np.bincount(r, weights=w, minlength=n_c), remaining, tol, steps)
        level += inc
        rate[c[saturated[r]]] = level
        keep = rate[c] == np.inf  # still unfrozen (a frozen rate is the finite level)
        if not keep.any():  # all frozen (most solves end in one round)
            break
        r, c, w = r[keep], c[keep], w[keep]
    rate[k <= 0] = 0.0
    return rate


def _fill(
    load: np.ndarray, remaining: np.ndarray, tol: np.ndarray, steps: np.ndarray
) -> tuple[Any, np.ndarray]:
    """One round of progressive filling: the unfrozen flows rise by ``inc`` until a loaded
    constraint saturates; ``remaining`` capacity is updated in place (``steps`` is scratch).
    Returns ``inc`` and the saturated constraints (the tightest ones where rounding left
    none exactly saturated)."""
    loaded = load > 0
    # an unloaded constraint's step is inf (or nan where nothing remains): the nan-skipping min
    # passes over both, cheaper than a masked divide (the solvers ignore the divide warnings)
    np.divide(remaining, load, out=steps)
    inc = np.fmin.reduce(steps)
    if inc != inc:  # nothing loaded
        inc = np.inf
    remaining -= load * inc
    np.maximum(remaining, 0.0, out=remaining)
    saturated = loaded & (remaining <= tol)
    if not saturated.any():
        saturated = loaded & (steps == inc)
    return inc, saturated


_ONES = np.ones(0)


def _ones(n: int) -> np.ndarray:
    """A read-only array of ``n`` ones (a view of one shared buffer, grown when needed)."""
    global _ONES  # noqa: PLW0603 - a cache of constants, not state: same output either way
    if len(_ONES) < n:
        _ONES = np.ones(max(n, 2 * len(_ONES)))
        _ONES.flags.writeable = False
    return _ONES[:n]


def sparse_matvec(
    fmt: str, ptr: np.ndarray, index: np.ndarray, data: np.ndarray, x: np.ndarray, n_rows: int
) -> np.ndarray:
    """``A @ x`` for the compressed matrix ``(data, index, ptr)`` with ``n_rows`` rows, ``fmt``
    "csc" (``ptr`` over columns: each row's entries added in their order, as ``bincount``
    does) or "csr". scipy's kernel without the checks of a sparse array object, which cost more
    than the product on a solver's small matrices; ``ptr`` and ``index`` share one integer
    type, ``data`` and ``x`` are float64."""
    if _sparsetools is None:
        kind = sp.csc_array if fmt == "csc" else sp.csr_array
        return np.asarray(kind((data, index, ptr), shape=(n_rows, len(x))) @ x)
    y = np.zeros(n_rows)
    getattr(_sparsetools, f"{fmt}_matvec")(n_rows, len(x), ptr, index, data, x, y)
    return y


@_quiet_divide
def maxmin_columns(
    col_ptr: np.ndarray,
    row: np.ndarray,
    use: np.ndarray,
    capacity: np.ndarray,
    count: np.ndarray,
    members: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None,
) -> np.ndarray:
    """:func:`maxmin_entries` on a usage matrix in CSC form, bit for bit: the same rates.

    Column ``v`` (variable ``v``) holds entries ``col_ptr[v]:col_ptr[v + 1]`` of ``row`` and
    ``use``. The entries stay in place for the whole solve: a round's constraint loads are one
    sparse product with the unfrozen variables' counts (frozen ones weigh 0), and the newly
    frozen variables one product of the transposed pattern with the saturated constraints, two
    passes in C instead of ``maxmin_entries``' seven compacting ones. The loads are the same
    sums: a CSC product adds ``use * count`` into each constraint in entry order, as
    ``bincount`` does, and the frozen entries add exact zeros. Once half the entries are
    frozen they are dropped (the rest keep their order), so late rounds cost what is left.

    ``members = (member_ptr, member_row, member_group)``: rows from ``len(capacity)`` on are
    group rows (:mod:`scaleup.sim.factored`) without a capacity: each one's load is added to its
    member constraints', and a saturated member saturates it. The same rates, to rounding.
    """
    cap = np.asarray(capacity, dtype=np.float64)
    n_c, n_v = len(cap), len(count)
    k = np.asarray(count, dtype=np.float64)
    rate = np.full(n_v, np.inf)
    lengths = np.diff(col_ptr)
    x = np.where((k > 0) & (lengths > 0), k, 0.0)  # weight while unfrozen (none: rate inf)
    if n_c and x.any():
        remaining = cap.copy()
        tol = _SATURATION_RTOL * cap
        level = 0.0
        steps = np.empty(n_c)
        ids = np.arange(n_v)  # the variable each column of the (compacted) system stands for
        n_rows = n_c
        if members is not None:
            m_ptr, m_row, m_group = members
            m_starts = m_ptr[:-1]
            n_rows += len(m_starts)
        row = np.asarray(row, dtype=np.int32 if n_rows < 2**31 else np.int64)
        col_ptr = np.asarray(col_ptr, dtype=np.int32 if len(row) < 2**31 else np.int64)
        if row.dtype != col_ptr.dtype:
            row = row.astype(np.int64)
            col_ptr = col_ptr.astype(np.int64)
        use = np.ascontiguousarray(use, dtype=np.float64)
        while True:
            ones = _ones(len(row))
            while True:
                load = sparse_matvec("csc", col_ptr, row, use, x, n_rows)
                if members is not None:  # group rows' loads onto their members
                    load = load[:n_c] + np.bincount(
                        m_row, weights=load[n_c:][m_group], minlength=n_c
                    )
                inc, saturated = _fill(load, remaining, tol, steps)
                level += inc
                sat = saturated.astype(np.float64)
                if members is not None:  # a group row is saturated with any of its members
                    sat = np.concatenate((sat, np.maximum.reduceat(sat[m_row], m_starts)))
                touched = sparse_matvec("csr", col_ptr, row, ones, sat, len(ids))
                newly = (touched > 0) & (x > 0)
                if not newly.any():  # no capacity binds what is left: rates stay inf
                    break
                rate[ids[newly]] = level
                x[newly] = 0.0
                live = x > 0
                left = int(lengths[live].sum())
                if 2 * left <= len(row):
                    break  # most entries are frozen: drop them (they add exact zeros)
            if not newly.any() or not left:
                break
            keep = np.repeat(live, lengths)
            row, use = row[keep], use[keep]
            ids, x, lengths = ids[live], x[live], lengths[live]
            col_ptr = np.zeros(len(ids) + 1, dtype=col_ptr.dtype)
            np.cumsum(lengths, out=col_ptr[1:])
    rate[k <= 0] = 0.0
    return rate


def _mix(x: np.ndarray) -> np.ndarray:
    """splitmix64's finaliser on uint64 arrays (wrapping arithmetic)."""
    x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return x ^ (x >> np.uint64(31))


def merge_constraints(system: Any, capacity: np.ndarray) -> tuple[np.ndarray, ...]:
    """The max-min system with interchangeable constraints merged (exact, fewer entries).

    Two constraints whose columns are proportional to their capacities for EVERY variable
    (``use[c1, v] / cap[c1] == use[c2, v] / cap[c2]``) fill at the same rate under any set of
    active variables, so they saturate together and one of them stands for both. A transfer
    sprayed over the 18 NVLinks of a GB200 (or 5/4/4/5 links over DGX H100's four NVSwitches)
    touches 18 channels up and 18 down with such columns: merged, it touches one of each, and
    progressive filling runs over ~5 entries per variable instead of ~40. Each merged
    constraint is normalised to capacity 1 (coefficients ``use / cap``). Values are grouped at
    36 significant bits (rounding of the 1/k splits), with the payload ratio ``carried / use``,
    and compared by a 128-bit fingerprint of the column. Members of a group carry flow at the
    same instants and ``cap[c]`` times the group's normalised payload flow, so the run keeps its
    byte/busy accounting per group and expands it per channel at the end (exact).
    Returns ``(col_ptr, row, use, capacity, carried / cap, group of each constraint or -1)``,
    the first five the merged system in CSC form.
    """
    col_ptr, row, use, carried = system
    n_v = len(col_ptr) - 1
    n_c = len(capacity)
    var = np.repeat(np.arange(n_v), np.diff(col_ptr))
    norm = use / capacity[row]
    mant, expo = np.frexp(norm)
    ratio = carried / use  # payload per unit of capacity used: 1 memory, pe/inflate fabric, 0 CTA
    quant = np.round(mant * 2.0**36).astype(np.int64) ^ (
        np.round(ratio * 2.0**20).astype(np.int64) << 37
    )
    # a constraint's column as an order-free 2 x 64-bit fingerprint (sum of mixed entry hashes)
    # plus its entry count: equal columns always match; distinct ones collide with p ~ 2^-128
    token = (
        (var.astype(np.uint64) << np.uint64(40))
        ^ quant.astype(np.uint64)
        ^ ((expo.astype(np.int64) + 2048).astype(np.uint64) << np.uint64(28))
    )
    fps = [np.bincount(row, weights=None, minlength=n_c).astype(np.uint64)]
    for seed in (0x9E3779B97F4A7C15, 0xD1B54A32D192ED03):
        with np.errstate(over="ignore"):
            h = _mix(token ^ np.uint64(seed))
        acc = np.zeros(n_c, dtype=np.uint64)
        np.add.at(acc, row, h)
        fps.append(acc)
    fp = np.stack(fps, axis=1)
    touched = np.zeros(n_c, dtype=bool)
    touched[row] = True
    _, first_of, group = np.unique(fp[touched], axis=0, return_index=True, return_inverse=True)
    row_group = np.full(n_c, -1, dtype=np.int64)
    row_group[np.flatnonzero(touched)] = group.ravel()
    group_of = range(len(first_of))
    code = var * len(group_of) + row_group[row]
    uniq, first = np.unique(code, return_index=True)  # one entry per (variable, group)
    m_var, m_row = uniq // len(group_of), uniq % len(group_of)
    m_ptr = np.concatenate([[0], np.cumsum(np.bincount(m_var, minlength=n_v))]).astype(np.int64)
    m_carried = carried[first] / capacity[row[first]]
    return m_ptr, m_row.astype(np.int64), norm[first], np.ones(len(group_of)), m_carried, row_group


def column_classes(system: Any) -> np.ndarray:
    """A class per variable of the usage columns ``(col_ptr, row, use, carried)``: variables
    with the same column (the same rows, coefficients and carried bytes, bit for bit, in the
    same order) share one.

    A max-min solve reads only the columns of the active variables, in their order, and their
    counts, so two active sets whose columns are equal position by position get the same
    rates and flows, bit for bit: a run can key its rate memo by classes instead of variable
    ids (a ring's steps repeat one system on other variables). Columns are grouped by a
    128-bit fingerprint and then compared entry by entry; should two fingerprints collide,
    every variable keeps a class of its own (the memo is then keyed by variable, as before).
    """
    col_ptr, row, use, carried = system
    n_v = len(col_ptr) - 1
    lengths = np.diff(col_ptr)
    var = np.repeat(np.arange(n_v), lengths)
    pos = (np.arange(len(row)) - col_ptr[var]).astype(np.uint64)
    bits = [
        np.asarray(row, dtype=np.int64).view(np.uint64),
        np.ascontiguousarray(use, dtype=np.float64).view(np.uint64),
        np.ascontiguousarray(carried, dtype=np.float64).view(np.uint64),
    ]
    fps = [lengths.astype(np.uint64)]
    for seed in (0x9E3779B97F4A7C15, 0xD1B54A32D192ED03):
        with np.errstate(over="ignore"):
            h = _mix(pos ^ np.uint64(seed))
            for b in bits:
                h = _mix(h ^ b)
        acc = np.zeros(n_v, dtype=np.uint64)
        np.add.at(acc, var, h)
        fps.append(acc)
    _, first, cls = np.unique(np.stack(fps, axis=1), axis=0, return_index=True,
                              return_inverse=True)  # fmt: skip
    cls = cls.ravel()
    partner = col_ptr[first[cls][var]] + pos.astype(np.int64)  # the same entry of the first
    if all(np.array_equal(b[partner], b) for b in bits):
        return cls.astype(np.int64)
    return np.arange(n_v, dtype=np.int64)


def equal_share(
    usage: Any,
    capacity: np.ndarray,
    *,
    count: np.ndarray | None = None,
    bound: np.ndarray | None = None,
) -> np.ndarray:
    """Each flow gets, on every constraint it crosses, capacity / flows there; its rate is the
    smallest of those. Not work-conserving (a flow limited elsewhere leaves capacity unused);
    kept as the naive baseline that ``maxmin`` improves on."""
    a = _as_matrix(usage)
    k = np.ones(a.shape[1]) if count is None else np.asarray(count, dtype=np.float64)
    load = a @ k
    share = np.where(
        load > 0, np.asarray(capacity, dtype=np.float64) / np.where(load > 0, load, 1.0), np.inf
    )
    dense = a.toarray() if sp.issparse(a) else a
    per = (
        np.where(dense > 0, share[:, None], np.inf).min(axis=0)
        if dense.size
        else np.full(a.shape[1], np.inf)
    )
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
        raise UsageError(
            f"unknown solver {name!r}; known: {', '.join(SOLVERS)}", source="solver"
        ) from None
