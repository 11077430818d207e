"""The quotient of a compiled schedule by a symmetry: one op per orbit, one constraint per orbit.

Split from :mod:`scaleup.sim.symmetry` (which finds the symmetry and explains why the quotient
times every op exactly) so that building the reduced fair-share system, and checking that the
system is invariant under each generator for a protocol, stands apart from the search.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
from scipy.sparse import coo_matrix
from scipy.sparse.csgraph import connected_components

from scaleup.arrays import unique
from scaleup.collectives.op_table import csr_rows, csr_sort_order
from scaleup.sim.factored import Factored, factor_groups
from scaleup.sim.fairshare import column_classes, merge_constraints
from scaleup.sim.memo import RateMemo
from scaleup.sim.pipeline import Pipeline
from scaleup.sim.protocols import Protocol
from scaleup.sim.symmetry import Generator, Symmetry

if TYPE_CHECKING:
    from scaleup.sim.simulate import CompiledSchedule

__all__ = ["Quotient"]

_RTOL = 1e-9  # latencies and coefficients computed along image routes may round differently


class Quotient:
    """The representative ops of a :class:`Symmetry`, shaped like a compiled schedule for
    :class:`~scaleup.sim.run.Run`, for one protocol. Build with :meth:`of` (None when the
    compiled system is not invariant under the symmetry for this protocol)."""

    def __init__(self, c: CompiledSchedule, sym: Symmetry, parts: dict[str, Any]) -> None:
        self.full = c
        self.sym = sym
        self.topology = c.topology
        self.net = c.net
        self.schedule = c.schedule
        t = c.schedule.table
        rep = sym.rep_ops
        self.n_ops = len(rep)
        self.count = c.count[rep]
        entries = csr_rows(t.dep_ptr, rep)
        n_deps = t.dep_ptr[rep + 1] - t.dep_ptr[rep]
        self.n_deps = n_deps.astype(np.int64)
        self.dep_ptr = np.concatenate([[0], np.cumsum(n_deps)]).astype(np.int64)
        self.dep_idx = sym.rep_of_op[t.dep_idx[entries]]
        owner = np.repeat(np.arange(self.n_ops, dtype=np.int64), n_deps)
        order = np.argsort(self.dep_idx, kind="stable")
        self.succ_idx = owner[order]
        self.succ_ptr = np.concatenate(
            [[0], np.cumsum(np.bincount(self.dep_idx, minlength=self.n_ops))]
        ).astype(np.int64)
        self._entries, self._order = entries, order  # for the pipeline, built when asked
        self._pipeline: Pipeline | None = None
        self.var_of_op = parts["var_of_op"]
        self.n_vars = parts["n_vars"]
        self._system: tuple[Any, np.ndarray, np.ndarray, dict[bytes, Any]] = (
            parts["system"],
            parts["capacity"],
            parts["latency"][rep],
            RateMemo(),
        )
        self._merged = merge_constraints(parts["system"], parts["capacity"])
        self._factored: list[Factored | None] = []  # computed on first use
        self._classes: np.ndarray | None = None
        self.orbit = parts["orbit"]  # full constraint -> quotient constraint (-1: unused)

    @classmethod
    def of(cls, c: CompiledSchedule, sym: Symmetry, proto: Protocol) -> Quotient | None:
        """The quotient for ``proto``, or None if the system is not invariant (see module)."""
        parts = _quotient_system(c, sym, proto)
        return None if parts is None else cls(c, sym, parts)

    def system(self, proto: Protocol) -> tuple[Any, np.ndarray, np.ndarray, dict[bytes, Any]]:
        """The quotient system (usage columns, capacity, latency per op, rate memo)."""
        return self._system

    def merged_system(self, proto: Protocol) -> tuple[np.ndarray, ...]:
        """The quotient system with interchangeable constraints merged."""
        return self._merged

    def factored_system(self, proto: Protocol) -> Factored | None:
        """The merged quotient system with group rows (:mod:`scaleup.sim.factored`), cached."""
        if not self._factored:
            self._factored.append(factor_groups(self._merged))
        return self._factored[0]

    def var_classes(self, proto: Protocol) -> np.ndarray:
        """The quotient's variables by column (the key of the rate memo), cached."""
        if self._classes is None:
            self._classes = column_classes(self._system[0])
        return self._classes

    def pipeline(self) -> Pipeline:
        """The pipelining structure of the representative ops (built on first use: only
        ``step_bytes`` runs read it)."""
        if self._pipeline is None:
            full_pipe = self.full.pipeline()
            rep = self.sym.rep_ops
            dep_stream = full_pipe.dep_stream[self._entries]
            dep_order = full_pipe.dep_order[self._entries]
            conn = full_pipe.conn_pred[rep]
            self._pipeline = Pipeline(
                dep_stream[self._order],
                dep_stream,
                full_pipe.streams_out[rep],
                np.where(conn >= 0, self.sym.rep_of_op[np.maximum(conn, 0)], -1),
                dep_order,
                dep_order[self._order],
            )
        return self._pipeline

    def start_s(self, proto: Protocol) -> float:
        """When the roots are released (the full schedule's start)."""
        return self.full.start_s(proto)


def _quotient_system(c: CompiledSchedule, sym: Symmetry, proto: Protocol) -> dict[str, Any] | None:
    (col_ptr, row, use, carried), capacity, latency, _memo = c.system(proto)
    used = _used(row, len(capacity))
    edges = []
    for gen in sym.generators:
        targets = _invariant_under(c, gen, proto)
        if targets is None:
            return None
        edges.append(targets)
    # orbits of constraints: components of c -> image(c) over the used ones, every generator
    where = np.full(len(capacity), -1, dtype=np.int64)
    where[used] = np.arange(len(used))
    rows = np.concatenate([np.arange(len(used))] * len(edges))
    cols = np.concatenate([where[e] for e in edges])
    graph = coo_matrix((np.ones(len(rows)), (rows, cols)), shape=(len(used),) * 2)
    n_orbits, label = connected_components(graph, directed=True, connection="weak")
    size = np.bincount(label, minlength=n_orbits)
    orbit = np.full(len(capacity), -1, dtype=np.int64)
    orbit[used] = label
    orbit_cap = np.zeros(n_orbits)
    orbit_cap[label] = capacity[used]
    # the representatives' variables, each standing for its orbit's flows spread over each orbit
    rep_vars, var_of_op = np.unique(c.var_of_op[sym.rep_ops], return_inverse=True)
    mult = np.zeros(len(rep_vars))
    mult[var_of_op] = sym.multiplicity
    if not np.array_equal(mult[var_of_op], sym.multiplicity):
        return None  # one variable, orbits of different sizes
    lens = np.diff(col_ptr)
    ent = csr_rows(col_ptr, rep_vars)
    ent_var = np.repeat(np.arange(len(rep_vars)), lens[rep_vars])
    ent_orbit = orbit[row[ent]]
    weight = mult[ent_var] / size[ent_orbit]
    code = ent_var * n_orbits + ent_orbit
    uniq, inv = np.unique(code, return_inverse=True)  # sorted: by variable, then orbit
    q_use = np.bincount(inv, weights=use[ent] * weight, minlength=len(uniq))
    q_car = np.bincount(inv, weights=carried[ent] * weight, minlength=len(uniq))
    q_var = uniq // n_orbits
    q_ptr = np.concatenate([[0], np.cumsum(np.bincount(q_var, minlength=len(rep_vars)))])
    system = (q_ptr.astype(np.int64), (uniq % n_orbits).astype(np.int64), q_use, q_car)
    return {
        "system": system,
        "capacity": orbit_cap,
        "var_of_op": var_of_op.astype(np.int64),
        "n_vars": len(rep_vars),
        "orbit": orbit,
        "latency": latency,
    }


def _invariant_under(c: CompiledSchedule, gen: Generator, proto: Protocol) -> np.ndarray | None:
    """The image of every used constraint if ``gen`` maps the system of ``proto`` onto itself
    (latencies, variables' coefficients, capacities), else None."""
    (col_ptr, row, use, carried), capacity, latency, _memo = c.system(proto)
    img = gen.op_image
    if not np.allclose(latency[img], latency, rtol=_RTOL, atol=0.0):
        return None
    var_img = np.full(c.n_vars, -1, dtype=np.int64)
    var_img[c.var_of_op] = c.var_of_op[img]
    if not np.array_equal(var_img[c.var_of_op], c.var_of_op[img]):
        return None  # two ops of one variable map to different variables
    lens = np.diff(col_ptr)
    if not np.array_equal(lens[var_img], lens):
        return None
    mapped = gen.con_image[row]
    if (mapped < 0).any():
        return None
    b_ent = csr_rows(col_ptr, var_img)
    a: slice | np.ndarray
    b: slice | np.ndarray
    if np.array_equal(mapped, row[b_ent]):  # the image columns list their constraints in the
        a = b = slice(None)  # mapped order (routes built alike): compare entry by entry
    else:  # else as sets: both sides sorted by constraint within each column
        a = csr_sort_order(lens, mapped)
        b = csr_sort_order(lens, row[b_ent])
        if not np.array_equal(mapped[a], row[b_ent][b]):
            return None
    if not np.allclose(use[a], use[b_ent][b], rtol=_RTOL, atol=0.0):
        return None
    if not np.allclose(carried[a], carried[b_ent][b], rtol=_RTOL, atol=0.0):
        return None
    in_used = np.zeros(len(capacity), dtype=bool)
    in_used[row] = True
    used = np.flatnonzero(in_used)
    targets = gen.con_image[used]
    if not in_used[targets].all() or len(unique(targets)) != len(used):
        return None
    if not np.allclose(capacity[targets], capacity[used], rtol=_RTOL, atol=0.0):
        return None
    return targets


def _used(row: np.ndarray, n_constraints: int) -> np.ndarray:
    """The constraints some entry uses, ascending (``np.unique(row)`` without the sort)."""
    mark = np.zeros(n_constraints, dtype=bool)
    mark[row] = True
    return np.flatnonzero(mark)
