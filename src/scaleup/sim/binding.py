"""The protocol-independent steps of binding a Schedule to a Topology: routes, variables, DAG.

Split from :mod:`scaleup.sim.simulate` (whose :class:`~scaleup.sim.simulate.CompiledSchedule`
calls these once per schedule and keeps the results) so that each step -- mapping ranks to
accelerators, routing every op, grouping ops into LMM variables in a key of the schedule alone,
successor lists, and the per-protocol usage columns -- reads as one function.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from scaleup.arrays import unique
from scaleup.collectives.op_table import OpTable, csr_rows
from scaleup.collectives.schedule import OpKind, Schedule
from scaleup.errors import SimulationError, UsageError
from scaleup.sim.network import Network
from scaleup.sim.protocols import Protocol
from scaleup.topology.model import Topology

__all__ = [
    "Variables",
    "op_routes",
    "rank_map",
    "successors",
    "transfer_codes",
    "transfer_pair",
    "usage_columns",
    "variables",
]


def rank_map(schedule: Schedule, topology: Topology, ranks: Sequence[int] | None) -> np.ndarray:
    """The accelerator index of every schedule rank (default: the first n); checked."""
    n_acc = len(topology.accelerators)
    n = schedule.nranks
    if ranks is None:
        if n > n_acc:
            raise SimulationError(
                f"schedule has {n} ranks, topology {topology.name} has {n_acc} accelerators"
            )
        return np.arange(n, dtype=np.int64)
    out = np.asarray(list(ranks), dtype=np.int64)
    if len(out) != n:
        raise UsageError(f"ranks maps {len(out)} ranks, the schedule has {n}", source="ranks")
    if len(unique(out)) != n or (n and (out.min() < 0 or out.max() >= n_acc)):
        raise UsageError(
            f"ranks must be {n} distinct accelerator indices in 0..{n_acc - 1}", source="ranks"
        )
    return out


def transfer_codes(t: OpTable, rmap: np.ndarray, n_acc: int) -> tuple[np.ndarray, np.ndarray]:
    """The point-to-point ops of ``t`` and the code of each one's transfer: ``(source x n_acc +
    destination) x 2 + reduce``, accelerators by index (``rmap``: each rank's), so that equal
    transfers share one code and codes sort by pair."""
    p2p = np.flatnonzero(t.kind != int(OpKind.SWITCH_REDUCE))
    src = rmap[t.src_rank[t.src_ptr[p2p]]].astype(np.int64)
    dst = rmap[t.dst_rank[t.dst_ptr[p2p]]].astype(np.int64)
    red = (t.kind[p2p] == int(OpKind.REDUCE)).astype(np.int64)
    return p2p, (src * n_acc + dst) * 2 + red


def transfer_pair(code: int, n_acc: int) -> tuple[int, int, bool]:
    """``(source, destination, reduce)`` of a :func:`transfer_codes` code."""
    return code // 2 // n_acc, code // 2 % n_acc, bool(code % 2)


def op_routes(
    net: Network, topology: Topology, t: OpTable, rmap: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """``(route, canon)`` of every op: its route id in ``net`` (added there as needed) and a
    canonical route key of this schedule alone (point-to-point routes in code order, then
    switch routes in order of appearance)."""
    n = t.n_ops
    route = np.zeros(n, dtype=np.int64)
    canon = np.zeros(n, dtype=np.int64)
    n_p2p_routes = 0
    n_acc = len(topology.accelerators)
    p2p, code = transfer_codes(t, rmap, n_acc)
    if len(p2p):
        uniq, inv = np.unique(code, return_inverse=True)
        pairs = [transfer_pair(c, n_acc) for c in uniq.tolist()]
        ids = np.array([net.transfer_route(s, d, reduce=r) for s, d, r in pairs], dtype=np.int64)
        route[p2p] = ids[inv]
        canon[p2p] = inv
        n_p2p_routes = len(uniq)
    switch_ops = np.flatnonzero(t.kind == int(OpKind.SWITCH_REDUCE))
    if len(switch_ops):
        first, inverse, keys = _switch_classes(t, rmap, switch_ops)
        ids = np.zeros(len(first), dtype=np.int64)
        for j in np.argsort(first, kind="stable").tolist():  # routes added in op order
            issuer, srcs, dsts = keys[j]
            try:
                ids[j] = net.switch_route(srcs, dsts, issuer)
            except SimulationError as error:
                raise SimulationError(
                    error.message, source=topology.name, entry=error.entry,
                    op=int(switch_ops[first[j]]),
                ) from None  # fmt: skip
        route[switch_ops] = ids[inverse]
        _, first, sw_inv = np.unique(route[switch_ops], return_index=True, return_inverse=True)
        appearance = np.empty(len(first), dtype=np.int64)
        appearance[np.argsort(first, kind="stable")] = np.arange(len(first))
        canon[switch_ops] = n_p2p_routes + appearance[sw_inv]
    return route, canon


def _switch_classes(
    t: OpTable, rmap: np.ndarray, ops: np.ndarray
) -> tuple[np.ndarray, np.ndarray, list[tuple[int, tuple[int, ...], tuple[int, ...]]]]:
    """The distinct (issuer, sources, destinations) accelerators of switch ops ``ops``:
    ``(first, inverse, keys)``, the position in ``ops`` where each class first appears, the class
    of every op, and each class's key. Ops are grouped by their numbers of sources and
    destinations, then by their rows of accelerators (numpy, no per-op tuples)."""
    n_src, n_dst = np.diff(t.src_ptr)[ops], np.diff(t.dst_ptr)[ops]
    inverse = np.zeros(len(ops), dtype=np.int64)
    first: list[np.ndarray] = []
    keys: list[tuple[int, tuple[int, ...], tuple[int, ...]]] = []
    shapes, _, shape_of = _unique_rows(np.stack([n_src, n_dst], axis=1))
    for j, (a, b) in enumerate(shapes.tolist()):
        group = np.flatnonzero(shape_of == j)
        members = ops[group]
        rows = np.concatenate([
            rmap[t.rank[members]][:, None],
            rmap[t.src_rank[csr_rows(t.src_ptr, members)]].reshape(-1, a),
            rmap[t.dst_rank[csr_rows(t.dst_ptr, members)]].reshape(-1, b),
        ], axis=1)  # fmt: skip
        uniq, at, inv = _unique_rows(rows)
        inverse[group] = len(keys) + inv
        first.append(group[at])
        keys.extend((int(r[0]), tuple(r[1 : 1 + a]), tuple(r[1 + a :])) for r in uniq.tolist())
    return np.concatenate(first), inverse, keys


def _unique_rows(rows: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``np.unique(rows, axis=0, return_index=True, return_inverse=True)`` by a lexicographic
    sort of the columns (several times faster than unique's sort of whole rows)."""
    order = np.lexsort(rows.T[::-1])
    ranked = rows[order]
    new = np.r_[True, np.any(ranked[1:] != ranked[:-1], axis=1)]
    inverse = np.empty(len(rows), dtype=np.int64)
    inverse[order] = np.cumsum(new) - 1
    return ranked[new], order[new], inverse  # a stable sort: a class's first row comes first


@dataclass(frozen=True)
class Variables:
    """The LMM variables: one per (route, issuing rank, channel tag), and the thread blocks."""

    var_of_op: np.ndarray
    var_route: np.ndarray
    var_cta: np.ndarray
    cta_rank: np.ndarray
    cta_channel: np.ndarray


def variables(
    route: np.ndarray, canon: np.ndarray, issuer: np.ndarray, channel: np.ndarray
) -> Variables:
    """Group ops into variables by a key of the schedule alone (``canon``, not the shared
    network's route ids), so the solver adds the same floats in the same order everywhere."""
    route_of_canon = np.zeros(int(canon.max(initial=-1)) + 1, dtype=np.int64)
    route_of_canon[canon] = route
    ch = channel.astype(np.int64)
    cta_code = issuer * (int(ch.max(initial=0)) + 1) + ch
    cta_uniq, cta_first, cta_inv = np.unique(cta_code, return_index=True, return_inverse=True)
    var_code = canon * len(cta_uniq) + cta_inv
    var_uniq, var_of_op = np.unique(var_code, return_inverse=True)
    return Variables(
        var_of_op=var_of_op,
        var_route=route_of_canon[var_uniq // len(cta_uniq)],
        var_cta=var_uniq % len(cta_uniq),
        cta_rank=issuer[cta_first],
        cta_channel=ch[cta_first],
    )


def successors(t: OpTable) -> tuple[np.ndarray, np.ndarray]:
    """``(succ_idx, succ_ptr)``: every op's dependants as CSR, from the dependency lists."""
    n = t.n_ops
    owner = np.repeat(np.arange(n, dtype=np.int64), np.diff(t.dep_ptr))
    order = np.argsort(t.dep_idx, kind="stable")
    succ_ptr = np.concatenate([[0], np.cumsum(np.bincount(t.dep_idx, minlength=n))])
    return owner[order], succ_ptr.astype(np.int64)


def usage_columns(
    net: Network,
    var_route: np.ndarray,
    var_cta: np.ndarray,
    proto: Protocol,
    cta_use: np.ndarray | None = None,
) -> tuple[Any, ...]:
    """CSC usage columns ``(col_ptr, row, use, carried)`` of every variable for ``proto``: its
    route's channel and memory entries, then, for fabric transfers, its thread block (row
    ``net.n_constraints + cta``, using ``cta_use[var]`` of it per byte/s, default 1; local ops
    use the whole GPU)."""
    routes = net.routes
    base = net.n_constraints
    used_routes, var_r = np.unique(var_route, return_inverse=True)
    r_rows, r_use, r_car, r_len, r_net = [], [], [], [], []
    for rid in used_routes.tolist():
        r = routes[rid]
        r_rows.append(np.concatenate([r.net_rows, r.mem_rows]).astype(np.int64))
        r_use.append(
            np.concatenate([r.net_vals * (r.inflate / proto.payload_efficiency), r.mem_vals])
        )
        r_car.append(np.concatenate([r.net_vals, r.mem_vals]))
        r_len.append(len(r_rows[-1]))
        r_net.append(len(r.net_rows) > 0)
    r_ptr = np.concatenate([[0], np.cumsum(r_len)]).astype(np.int64)
    none_i, none_f = [np.zeros(0, dtype=np.int64)], [np.zeros(0)]  # an empty schedule
    rows_all = np.concatenate(r_rows or none_i)
    use_all, car_all = np.concatenate(r_use or none_f), np.concatenate(r_car or none_f)
    ent = csr_rows(r_ptr, var_r)
    ent_var = np.repeat(np.arange(len(var_route)), r_ptr[var_r + 1] - r_ptr[var_r])
    has_cta = np.asarray(r_net, dtype=bool)[var_r]
    lens = r_ptr[var_r + 1] - r_ptr[var_r]
    col_ptr = np.concatenate([[0], np.cumsum(lens + has_cta)]).astype(np.int64)
    # scatter without sorting: a variable's route entries, then its CTA entry last
    slot = col_ptr[ent_var] + np.arange(len(ent)) - np.repeat(np.cumsum(lens) - lens, lens)
    cta_v = np.flatnonzero(has_cta)
    n_e = int(col_ptr[-1])
    row_e, use_e, car_e = np.empty(n_e, dtype=np.int64), np.ones(n_e), np.zeros(n_e)
    row_e[slot], use_e[slot], car_e[slot] = rows_all[ent], use_all[ent], car_all[ent]
    row_e[col_ptr[cta_v + 1] - 1] = base + var_cta[cta_v]
    if cta_use is not None:
        use_e[col_ptr[cta_v + 1] - 1] = cta_use[cta_v]
    return (col_ptr, row_e.astype(np.int64), use_e, car_e)
