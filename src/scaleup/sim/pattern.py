"""Ring collectives simulated from their representative chains, never built in full; and
:class:`Pattern`, what every structure timed from representatives shares (the flow-class
quotient over its :class:`Move` s, the run, the lower bound, the route check), which
:mod:`scaleup.sim.table_pattern` and :mod:`scaleup.sim.nvls_tree_pattern` use too.

A ring all_reduce of 1,024 ranks on 8 channels is ~25 million ops; built, compiled and searched
for symmetry it needs gigabytes (docs/models.md §6). Its symmetry is visible in the rings alone
(:mod:`scaleup.sim.lane_orbits`), so :class:`RingPattern` finds the orbits of the chains first,
builds only one chain per orbit (:data:`~scaleup.collectives.algorithms.ring.ROW_BUILDERS`, with
dependencies on other chains pointed at their representatives: the quotient DAG), compiles those
ops alone, and runs the flow-class quotient of :mod:`scaleup.sim.quotient` over them: a
representative with multiplicity ``|F|`` puts ``|F| / |C|`` of its usage on each constraint orbit
``C``, which is weighted progressive filling, with the per-flow solve's rates. Memory and time
follow the representatives (ranks x channels / group order chains) instead of the ops.

What is checked before the pattern is trusted, so that its result is the exact run's: every
generator maps lanes onto lanes and the fabric onto itself (capacities, latencies, accelerator
types); chains of one orbit carry the same count; every representative's route, mapped by each
generator, is the route the simulator takes between the mapped ranks (same constraints, same
coefficients, same latency); constraint orbits are closed under every generator and thread
blocks of one orbit have one capacity. Anything else (a failed link, an uneven mesh, a subset of
ranks, a pipelined run) returns None and the caller builds the whole schedule.
``scaleup bench --exact`` never takes this path; tests/sim/test_pattern.py compares the two.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from scaleup.arrays import unique
from scaleup.collectives.algorithms import prepare_params
from scaleup.collectives.algorithms.ring import (
    ROW_BUILDERS,
    Lanes,
    Rows,
    chain_starts,
    lanes,
    row_counts,
)
from scaleup.collectives.schedule import OpKind, Schedule
from scaleup.collectives.spec import CollectiveSpec, itemsize
from scaleup.errors import SimulationError, UsageError
from scaleup.sim.fairshare import get_solver
from scaleup.sim.lane_orbits import LaneGenerator, Orbits, lane_generators, orbits
from scaleup.sim.network import Network
from scaleup.sim.protocols import Protocol, protocol
from scaleup.sim.quotient import Quotient
from scaleup.sim.route_symmetry import carry_routes, fabric_automorphism, routes_carried
from scaleup.sim.run import Run
from scaleup.sim.simulate import CompiledSchedule
from scaleup.sim.symmetry import Symmetry
from scaleup.sim.timeline import SimResult
from scaleup.topology.model import Topology

__all__ = ["Move", "Pattern", "RingPattern", "routes_follow"]

_RTOL = 1e-9


@dataclass(frozen=True)
class Move:
    """One automorphism as a pattern uses it: ranks move by ``sigma``, network constraints by
    ``con_image`` (-1: the device map does not say), channel tags by ``kappa`` (-1: no image)."""

    sigma: np.ndarray
    con_image: np.ndarray
    kappa: np.ndarray


class Pattern:
    """Representative ops, compiled, standing for a whole schedule: :meth:`run` and
    :meth:`lower_bound_s` as on a :class:`~scaleup.sim.CompiledSchedule`, over the flow-class
    quotient that ``moves`` (automorphisms of the schedule and the fabric) and the
    multiplicities (ops each representative stands for) define."""

    #: whether :meth:`run` takes ``step_bytes`` (the representatives know the whole table's
    #: pipelining structure)
    pipelined = False

    def __init__(
        self, compiled: CompiledSchedule, multiplicity: np.ndarray, moves: tuple[Move, ...],
        n_ops_full: int, n_tags: int,
    ) -> None:  # fmt: skip
        self.compiled = compiled
        #: the representative ops, as a Schedule (its ``params`` are the full schedule's)
        self.schedule: Schedule = compiled.schedule
        self.multiplicity = multiplicity
        self.moves = moves
        #: how many ops the full schedule has
        self.n_ops_full = n_ops_full
        #: channel tags of the full schedule (the thread blocks' grid is ranks x tags)
        self.n_tags = n_tags
        self._quotients: dict[str, Quotient | None] = {}
        self._unit: dict[str, float] = {}

    @property
    def n_operands_full(self) -> int:
        """Sources and destinations of all the full schedule's ops (what replaying it costs):
        each representative's, times the ops it stands for."""
        t = self.schedule.table
        per_op = np.diff(t.src_ptr) + np.diff(t.dst_ptr)
        return int((per_op * self.multiplicity).sum())

    # ---- the quotient --------------------------------------------------------------------
    def quotient(self, proto: Protocol) -> Quotient | None:
        """The flow-class system for ``proto`` over the representatives, cached (None when a
        constraint orbit is not closed or thread blocks of an orbit differ)."""
        if proto.name not in self._quotients:
            parts = _pattern_system(self, proto)
            sym = Symmetry((), np.arange(len(self.multiplicity)), np.arange(len(self.multiplicity)),
                           self.multiplicity.astype(np.int64))  # fmt: skip
            self._quotients[proto.name] = (
                None if parts is None else Quotient(self.compiled, sym, parts)
            )
        return self._quotients[proto.name]

    def run(
        self, protocol_name: str = "simple", *, dtype: str = "float32", scale: float = 1.0,
        solver: str = "maxmin", step_bytes: float | None = None, exact: bool = False,
    ) -> SimResult:  # fmt: skip
        """Time the collective (see :meth:`~scaleup.sim.CompiledSchedule.run`); the result's
        per-op arrays hold the representatives. ``exact``, another solver, or ``step_bytes``
        where the pattern is not :attr:`pipelined`, are the full schedule's business: a
        UsageError."""
        if exact or solver != "maxmin" or (step_bytes is not None and not self.pipelined):
            raise UsageError(
                "a pattern runs flow classes with the maxmin solver"
                + ("" if self.pipelined else ", unpipelined")
                + "; build the whole schedule for exact, other solvers or step_bytes",
                source="pattern",
            )
        if step_bytes is not None and not step_bytes > 0:
            raise UsageError(f"step_bytes must be > 0, got {step_bytes!r}", source="step_bytes")
        proto = protocol(protocol_name)
        if proto.name != "simple" and np.any(self.schedule.table.kind == int(OpKind.SWITCH_REDUCE)):
            raise SimulationError(
                "nvls (switch_reduce) runs with the simple protocol only", source=proto.name
            )
        quotient = self.quotient(proto)
        if quotient is None:
            raise UsageError("the pattern's constraint orbits do not close", source="pattern")
        solve = get_solver(solver)
        return Run(quotient, proto, itemsize(dtype) * float(scale), solve, step_bytes,
                   fast_forward=True).result()  # fmt: skip

    def lower_bound_s(
        self, protocol_name: str = "simple", *, dtype: str = "float32", scale: float = 1.0
    ) -> float:
        """The congestion bound of :meth:`~scaleup.sim.CompiledSchedule.lower_bound_s`: an
        orbit's members carry equal loads, so its load per member is the quotient's."""
        proto = protocol(protocol_name)
        unit = self._unit.get(proto.name)
        if unit is None:
            q = self.quotient(proto)
            if q is None:
                return self.compiled.start_s(proto)
            (col_ptr, row, use, _carried), capacity, _lat, _memo = q.system(proto)
            var_count = np.bincount(q.var_of_op, weights=q.count, minlength=q.n_vars)
            per_entry = use * np.repeat(var_count, np.diff(col_ptr))
            load = np.bincount(row, weights=per_entry, minlength=len(capacity))
            unit = self._unit[proto.name] = float((load / capacity).max(initial=0.0))
        return float(self.compiled.start_s(proto) + unit * itemsize(dtype) * float(scale))


class RingPattern(Pattern):
    """A ring all_reduce, all_gather or reduce_scatter as its representative chains, compiled.
    Build with :meth:`of` (None where the pattern does not hold, see module)."""

    def __init__(
        self, compiled: CompiledSchedule, multiplicity: np.ndarray, generators: tuple[Any, ...],
        n_ops_full: int, moves: tuple[Move, ...], n_tags: int,
    ) -> None:  # fmt: skip
        super().__init__(compiled, multiplicity, moves, n_ops_full, n_tags)
        self.generators = generators

    @classmethod
    def of(
        cls, algorithm: str, spec: CollectiveSpec, params: dict[str, Any], topology: Topology,
        network: Network | None = None, max_chains: int | None = None,
    ) -> RingPattern | None:  # fmt: skip
        """The pattern of ``build_schedule(algorithm, spec, **params)`` on ``topology`` (the
        first ``spec.nranks`` accelerators), or None where it does not hold or would keep more
        than ``max_chains`` representative chains (checked before any op is built)."""
        if algorithm != "ring" or spec.collective not in ROW_BUILDERS or spec.nranks < 2:
            return None
        params = prepare_params(algorithm, spec, params)
        n = spec.nranks
        ln = lanes(n, params)
        net = Network(topology) if network is None else network
        gens = lane_generators(ln.orders, topology, net)
        if not gens:
            return None
        start = chain_starts(spec.collective, ln, n)
        row_at = np.empty((len(ln), n), dtype=np.int64)  # (lane, start position) -> row
        row_at[np.repeat(np.arange(len(ln)), n), start] = np.arange(len(ln) * n)
        lane_of = np.arange(len(ln) * n) // n
        row_images = [row_at[g.lane_image[lane_of], (start + g.shift[lane_of]) % n] for g in gens]
        counts = row_counts(spec, params)
        if any(not np.array_equal(counts[img], counts) for img in row_images):
            return None  # chains of one orbit must carry the same count
        rows = orbits(len(ln) * n, row_images)
        if max_chains is not None and len(rows.first) > max_chains:
            return None
        ranks = orbits(n, [g.sigma for g in gens])
        built = ROW_BUILDERS[spec.collective](
            spec, params, Rows(rows.first, rows.label, ranks.first)
        )
        assert built.op_group is not None  # noqa: S101 - built for rows
        mult = np.r_[rows.size, ranks.size][built.op_group].astype(np.float64)
        moves = _lane_moves(ln, gens)
        if moves is None:
            return None
        carry_routes(net, built.schedule.table, [(m.sigma, m.con_image) for m in moves])
        compiled = CompiledSchedule(built.schedule, topology, None, net)
        if not all(routes_follow(compiled, m) for m in moves):
            return None
        full = int(np.r_[rows.size, ranks.size][built.op_group].sum())
        return cls(compiled, mult, gens, full, moves, int(ln.channel.max()) + 1)


def routes_follow(c: CompiledSchedule, move: Move) -> bool:
    """Whether every representative's route, moved by ``move``, is the route the simulator
    takes between the moved ranks (for an in-switch reduction: the moved issuer, sources and
    destinations): same (mapped) constraints with the same coefficients, same latency and class.

    Routes an automorphism of the whole fabric carries onto the simulator's own are known to
    follow (:mod:`scaleup.sim.route_symmetry`); the rest are routed between the moved ranks and
    compared all at once (concatenated, sorted by route then constraint), which is the
    per-route comparison: a route's constraints are distinct, so sorting them is unique."""
    t = c.schedule.table
    net = c.net
    routes = net.routes
    sigma = move.sigma
    ids, first = np.unique(c.route, return_index=True)
    src, dst = t.src_rank[t.src_ptr[first]], t.dst_rank[t.dst_ptr[first]]
    automorphism = fabric_automorphism(net, sigma, move.con_image)
    compare = ~routes_carried(net, t.kind[first], src, dst, automorphism)
    ids, first = ids[compare], first[compare]
    mine = [routes[i] for i in ids.tolist()]
    theirs = []
    for i in first.tolist():
        if t.kind[i] == int(OpKind.SWITCH_REDUCE):
            srcs = sigma[t.src_rank[t.src_ptr[i] : t.src_ptr[i + 1]]]
            dsts = sigma[t.dst_rank[t.dst_ptr[i] : t.dst_ptr[i + 1]]]
            rid = net.switch_route(
                tuple(srcs.tolist()), tuple(dsts.tolist()), int(sigma[t.rank[i]])
            )
        else:
            src, dst = int(sigma[t.src_rank[t.src_ptr[i]]]), int(sigma[t.dst_rank[t.dst_ptr[i]]])
            rid = net.transfer_route(src, dst, reduce=bool(t.kind[i] == int(OpKind.REDUCE)))
        theirs.append(routes[rid])
    if any(a.link_class != b.link_class or a.inflate != b.inflate
           for a, b in zip(mine, theirs, strict=True)):  # fmt: skip
        return False
    lat_a, lat_b = (np.array([r.latency_s for r in x], dtype=np.float64) for x in (mine, theirs))
    if not np.isclose(lat_a, lat_b, rtol=_RTOL, atol=0.0).all():
        return False
    return _same_usage(
        [r.net_rows for r in mine], [r.net_vals for r in mine],
        [r.net_rows for r in theirs], [r.net_vals for r in theirs], move.con_image,
    ) and _same_usage(
        [r.mem_rows for r in mine], [r.mem_vals for r in mine],
        [r.mem_rows for r in theirs], [r.mem_vals for r in theirs], move.con_image,
    )  # fmt: skip


def _same_usage(
    rows_a: list[np.ndarray], vals_a: list[np.ndarray], rows_b: list[np.ndarray],
    vals_b: list[np.ndarray], image: np.ndarray,
) -> bool:  # fmt: skip
    """Whether route ``k`` of ``a``, its constraints moved by ``image``, uses the constraints
    route ``k`` of ``b`` uses, with the same coefficients (to ``_RTOL``), for every ``k``."""
    len_a = np.array([len(r) for r in rows_a], dtype=np.int64)
    if not np.array_equal(len_a, [len(r) for r in rows_b]):
        return False
    if not len_a.sum():
        return True
    owner = np.repeat(np.arange(len(len_a)), len_a)
    moved = image[np.concatenate(rows_a).astype(np.int64)]
    if (moved < 0).any():
        return False
    rows = np.concatenate(rows_b).astype(np.int64)
    a, b = np.lexsort((moved, owner)), np.lexsort((rows, owner))
    if not np.array_equal(moved[a], rows[b]):
        return False
    va = np.concatenate(vals_a).astype(np.float64)
    vb = np.concatenate(vals_b).astype(np.float64)
    return bool(np.allclose(va[a], vb[b], rtol=_RTOL, atol=0))


def _pattern_system(p: Pattern, proto: Protocol) -> dict[str, Any] | None:
    """The quotient system (as :func:`scaleup.sim.quotient._quotient_system` makes it) from the
    representatives' own columns, the moves' constraint orbits and the multiplicities."""
    c = p.compiled
    (col_ptr, row, use, carried), capacity, latency, _memo = c.system(proto)
    net = c.net
    base = net.n_constraints
    network = orbits(base, [m.con_image[:base] for m in p.moves])
    used_net = unique(row[row < base])
    if not _closed(network, used_net, p.moves):
        return None
    cta_label, cta_size = _cta_orbits(c, p.moves, p.n_tags)
    # thread blocks of one orbit: the same capacity (one accelerator type, checked per generator)
    n_net = len(network.size)
    orbit = np.r_[network.label, n_net + cta_label]
    size = np.r_[network.size, cta_size]
    orbit_cap = np.zeros(len(size))
    orbit_cap[orbit] = capacity
    if not np.allclose(orbit_cap[orbit], capacity, rtol=_RTOL, atol=0.0):
        return None
    var_mult = np.zeros(c.n_vars)
    var_mult[c.var_of_op] = p.multiplicity
    if not np.array_equal(var_mult[c.var_of_op], p.multiplicity):
        return None  # one variable, orbits of different sizes
    lens = np.diff(col_ptr)
    ent_var = np.repeat(np.arange(c.n_vars), lens)
    ent_orbit = orbit[row]
    weight = var_mult[ent_var] / size[ent_orbit]
    code = ent_var * len(size) + ent_orbit
    uniq, inv = np.unique(code, return_inverse=True)
    q_use = np.bincount(inv, weights=use * weight, minlength=len(uniq))
    q_car = np.bincount(inv, weights=carried * weight, minlength=len(uniq))
    q_var = uniq // len(size)
    q_ptr = np.concatenate([[0], np.cumsum(np.bincount(q_var, minlength=c.n_vars))])
    used = np.zeros(len(size), dtype=bool)
    used[ent_orbit] = True
    return {
        "system": (q_ptr.astype(np.int64), (uniq % len(size)).astype(np.int64), q_use, q_car),
        "capacity": orbit_cap,
        "var_of_op": c.var_of_op.astype(np.int64),
        "n_vars": c.n_vars,
        "orbit": np.where(used[orbit], orbit, -1),
        "latency": latency,
    }


def _closed(network: Orbits, used: np.ndarray, moves: tuple[Move, ...]) -> bool:
    """Whether every member of the orbits of ``used`` has an image under every move."""
    members = np.flatnonzero(np.isin(network.label, unique(network.label[used])))
    return all(bool((m.con_image[members] >= 0).all()) for m in moves)


def _cta_orbits(
    c: CompiledSchedule, moves: tuple[Move, ...], tags: int
) -> tuple[np.ndarray, np.ndarray]:
    """Orbit label of each representative thread block (rank, channel tag) and every orbit's
    size, over the (rank, tag) grid."""
    n = c.schedule.nranks
    grid_r, grid_k = np.divmod(np.arange(n * tags), tags)
    images = [
        np.where(m.kappa[grid_k] >= 0, m.sigma[grid_r] * tags + m.kappa[grid_k], -1) for m in moves
    ]
    cells = orbits(n * tags, images)
    rep = c.cta_rank.astype(np.int64) * tags + c.cta_channel.astype(np.int64)
    label = cells.label[rep]
    kept, local = np.unique(label, return_inverse=True)
    return local.astype(np.int64), cells.size[kept]


def _lane_moves(ln: Lanes, gens: tuple[LaneGenerator, ...]) -> tuple[Move, ...] | None:
    """The lane generators as moves: each lane's tag goes to its image lane's tag (None when
    two lanes of one tag disagree)."""
    tags = int(ln.channel.max()) + 1
    moves = []
    for g in gens:
        kappa = np.full(tags, -1, dtype=np.int64)
        for lane, other in enumerate(g.lane_image.tolist()):
            a, b = int(ln.channel[lane]), int(ln.channel[other])
            if kappa[a] not in (-1, b):
                return None
            kappa[a] = b
        moves.append(Move(g.sigma, g.con_image, kappa))
    return tuple(moves)
