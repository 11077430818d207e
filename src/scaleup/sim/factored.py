"""Constraint groups of a merged max-min system: one entry for the many rows a column loads alike.

An in-switch reduction (NVLS) over a 72-GPU NVL72 rack loads every one of the 72 GPUs' NVLink
legs and HBMs by the same amount per byte. :func:`~scaleup.sim.fairshare.merge_constraints`
merges constraints that are alike for *every* variable; these 72 stay distinct, because other
transfers (the tree across racks, a GPU's own copies) load them one by one, so every such column
keeps 72+ entries and on ``8xgb200-nvl72`` 94% of a solve's entries are theirs.

Here the constraints that nearly the same wide columns touch form *blocks* (a rack's HBMs, its
legs up, its legs down; :func:`factor_groups`), and a column that touches every member of a
block keeps one entry on the block's *group row* ``n_c + g`` (its least coefficient there) plus
residual entries where it uses more. A group row has no capacity of its own: its load is added
to each member's before the filling compares loads with capacities, and a member saturating
freezes the group's columns (:func:`~scaleup.sim.fairshare.maxmin_columns` with ``members``).
The loads are the same sums taken in another order, so the rates agree with the plain system to
rounding, and the payload flow per constraint is expanded the same way (:func:`onto_members`).
Nothing changes for systems without such blocks: :func:`factor_groups` returns None and the run
solves the merged system as before, bit for bit.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import scipy.sparse as sp
from scipy.sparse.csgraph import connected_components

__all__ = ["MIN_GROUP", "Factored", "factor_groups", "onto_members"]

#: Members a block needs (an NVL72 rack's 72 HBMs or legs, a DGX's 8); columns of at least
#: twice as many entries are the wide ones that define blocks (a ring step has 2-5)
MIN_GROUP = 8
#: Jaccard similarity of two constraints' sets of long columns from which they share a block:
#: two legs of a k-GPU NVLS domain share the k reductions of k + 2 columns (0.8 at k = 8, 0.97
#: at 72), a leg and an HBM half of theirs. Only the compression depends on it: a column gets a
#: group entry only where it touches every member
_SIMILAR = 0.75
#: Share of the merged system's entries the groups must absorb to be worth a second system
_MIN_SHARE = 0.5


class Factored(NamedTuple):
    """A merged system ``(col_ptr, row, use, carried)`` in CSC form over ``n_c`` constraints
    and the group rows ``n_c ..`` after them; group ``g``'s members are
    ``member_row[member_ptr[g] : member_ptr[g + 1]]`` (``member_group`` names each one's)."""

    col_ptr: np.ndarray
    row: np.ndarray
    use: np.ndarray
    carried: np.ndarray
    member_ptr: np.ndarray
    member_row: np.ndarray
    member_group: np.ndarray
    n_c: int


def onto_members(values: np.ndarray, f: Factored) -> np.ndarray:
    """Per-row ``values`` (constraints, then group rows) as per-constraint sums: each group row's
    value added to every member."""
    n_c = f.n_c
    spread = np.bincount(f.member_row, weights=values[n_c:][f.member_group], minlength=n_c)
    return values[:n_c] + spread


def factor_groups(merged: tuple[np.ndarray, ...]) -> Factored | None:
    """The merged system ``(col_ptr, row, use, capacity, carried, group)`` of
    :func:`~scaleup.sim.fairshare.merge_constraints` with group rows (see module); None where
    they would absorb under half of its entries.

    Groups are *blocks*: connected sets of at least :data:`MIN_GROUP` constraints whose sets
    of long columns (at least ``2 * MIN_GROUP`` entries) have a Jaccard similarity of at least
    :data:`_SIMILAR`. An NVL72 rack's 72 HBMs are touched by every in-switch op of the rack,
    its GPUs' NVLink legs up by the reductions (and each by its own GPU's multicasts), the
    legs down by the multicasts: three blocks, although no two legs have exactly the same
    columns. A column that touches every member of a block gets one group entry of its least
    coefficient (and least payload ratio) there and keeps a residual entry only where it uses
    more (an NVLS op's issuer); on a block it touches in part it keeps its entries."""
    col_ptr, row, use, capacity, carried = merged[:5]
    n_v, n_c = len(col_ptr) - 1, len(capacity)
    row, use, carried = np.asarray(row), np.asarray(use), np.asarray(carried)
    lengths = np.diff(col_ptr)
    var = np.repeat(np.arange(n_v), lengths)
    long_entry = lengths[var] >= 2 * MIN_GROUP
    if np.count_nonzero(long_entry) < _MIN_SHARE * len(row):
        return None
    touch = sp.csr_matrix((np.ones(np.count_nonzero(long_entry)), (row[long_entry],
                           var[long_entry])), shape=(n_c, n_v))  # fmt: skip
    both = (touch @ touch.T).tocoo()  # long columns two constraints share
    n_long = np.asarray(touch.sum(axis=1)).ravel()
    a, b, shared = both.row, both.col, both.data
    similar = (a < b) & (shared >= _SIMILAR * (n_long[a] + n_long[b] - shared))
    links = sp.coo_matrix((np.ones(np.count_nonzero(similar)), (a[similar], b[similar])),
                          shape=(n_c, n_c))  # fmt: skip
    _, block = connected_components(links, directed=False)
    size = np.bincount(block)
    big = (size >= MIN_GROUP) & (np.bincount(block, weights=n_long) > 0)
    n_g = int(np.count_nonzero(big))
    if not n_g:
        return None
    gid = np.full(len(size), -1, dtype=np.int64)
    gid[big] = np.arange(n_g)
    row_group = gid[block]
    member_size = np.bincount(row_group[row_group >= 0], minlength=n_g)
    # (column, group) pairs where the column touches every member: one entry each
    e = np.flatnonzero(long_entry & (row_group[row] >= 0))
    pair = var[e] * n_g + row_group[row[e]]
    pairs, inverse, count = np.unique(pair, return_inverse=True, return_counts=True)
    whole = count == member_size[pairs % n_g]
    inverse = inverse.ravel()
    e = e[whole[inverse]]
    keep_pair = np.cumsum(whole) - 1  # renumber the whole pairs
    inverse = keep_pair[inverse[whole[inverse]]]
    pairs = pairs[whole]
    if len(e) < _MIN_SHARE * len(row):
        return None
    base_use = np.full(len(pairs), np.inf)
    base_car = np.full(len(pairs), np.inf)
    np.minimum.at(base_use, inverse, use[e])
    np.minimum.at(base_car, inverse, carried[e])
    res_use, res_car = use[e] - base_use[inverse], carried[e] - base_car[inverse]
    residual = (res_use > 0) | (res_car > 0)
    plain = np.ones(len(row), dtype=bool)
    plain[e] = False
    e_var = np.r_[var[plain], var[e[residual]], pairs // n_g]
    e_row = np.r_[row[plain], row[e[residual]], n_c + pairs % n_g]
    e_use = np.r_[use[plain], res_use[residual], base_use]
    e_car = np.r_[carried[plain], res_car[residual], base_car]
    by_var = np.argsort(e_var, kind="stable")
    f_ptr = np.r_[0, np.cumsum(np.bincount(e_var, minlength=n_v))].astype(np.int64)
    members = np.flatnonzero(row_group >= 0)
    by_group = np.argsort(row_group[members], kind="stable")
    member_row = members[by_group]
    member_ptr = np.r_[0, np.cumsum(member_size)].astype(np.int64)
    return Factored(
        f_ptr, e_row[by_var].astype(np.int64), e_use[by_var], e_car[by_var],
        member_ptr, member_row.astype(np.int64), row_group[member_row], n_c,
    )  # fmt: skip
