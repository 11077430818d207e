"""A schedule built in full, compiled as one op per symmetry orbit: routes only where flows differ.

The flow-class quotient (:mod:`scaleup.sim.quotient`) reads only its representatives' routes,
yet a :class:`~scaleup.sim.CompiledSchedule` routes every distinct pair first: for NVLS-Tree on
128 x DGX H100 that is 4,064 multipath splits (a third of the command's time) after a
breadth-first search from every rank, which at 16,384 GPUs is quadratic in memory and time. The
symmetry itself needs no route: :func:`~scaleup.sim.symmetry.find_symmetry` reads the op table,
the fabric's devices and the thread blocks (:class:`TableBinding`). So :class:`TablePattern`
finds the symmetry on the bare table, keeps one op per orbit with its dependencies pointed at
their orbits' representatives (the quotient DAG, as :class:`~scaleup.sim.pattern.RingPattern`
builds it for rings row by row), compiles those ops alone, and checks what the whole compile
would have checked of them: every generator moves every representative's route (point to point
or in-switch) onto the route the simulator takes between the moved ranks, with the same
coefficients, latency and link class (:func:`~scaleup.sim.pattern.routes_follow`); constraint
orbits are closed and thread blocks of an orbit have one capacity. A generator the fabric does
not follow (a degraded link moved onto a healthy one: capacities, latencies, accelerator types)
or whose routes differ is dropped and the orbits of the rest are taken, so a broken symmetry
costs the part of the schedule it touches (down to the whole table when none is left). A
pipelined run (``step_bytes``) reads the whole table's cut-through edges and connection order
moved onto the representatives, as :meth:`scaleup.sim.quotient.Quotient.pipeline` does.

What is not checked, against the whole compile, is the route of an op that no generator reaches
from a representative in one step. Routing is a function of the fabric's graph, capacities and
latencies, which every generator preserves, so a product of generators moves routes as its
factors do; the one exception is a tie in the ECMP fan-out cap (:data:`~scaleup.sim.params.
MAX_ECMP_FANOUT`), broken by channel id, which the checked images would show on the
representatives' own routes. ``scaleup bench --exact`` never takes this path;
tests/sim/test_table_pattern.py compares the two.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from scaleup.collectives.op_table import OpTable, csr_rows
from scaleup.collectives.schedule import Schedule
from scaleup.sim.lane_orbits import fabric_invariant
from scaleup.sim.network import Network
from scaleup.sim.pattern import Move, Pattern, routes_follow
from scaleup.sim.pipeline import Pipeline, stream_parts
from scaleup.sim.protocols import protocol
from scaleup.sim.simulate import CompiledSchedule
from scaleup.sim.symmetry import Symmetry, find_symmetry, symmetry_of
from scaleup.topology.model import Topology

__all__ = ["TableBinding", "TablePattern", "representatives"]


@dataclass(frozen=True)
class TableBinding:
    """A schedule on the first ``n`` accelerators of a fabric, before any route: what
    :func:`~scaleup.sim.symmetry.find_symmetry` reads (thread blocks as
    :func:`~scaleup.sim.binding.variables` numbers them)."""

    schedule: Schedule
    topology: Topology
    net: Network
    rank_map: np.ndarray
    n_ops: int
    n_cta: int
    cta_rank: np.ndarray
    cta_channel: np.ndarray

    @classmethod
    def of(cls, schedule: Schedule, topology: Topology, net: Network) -> TableBinding:
        t = schedule.table
        issuer, ch = t.rank.astype(np.int64), t.channel.astype(np.int64)
        _, first = np.unique(issuer * (int(ch.max(initial=0)) + 1) + ch, return_index=True)
        return cls(
            schedule, topology, net, np.arange(schedule.nranks, dtype=np.int64), t.n_ops,
            len(first), issuer[first], ch[first],
        )  # fmt: skip


def representatives(schedule: Schedule, sym: Symmetry) -> Schedule:
    """The schedule's representative ops (``sym.rep_ops``, in order), every dependency on an op
    pointed at its orbit's representative: the quotient DAG as a schedule."""
    t = schedule.table
    rep = sym.rep_ops

    def rows(ptr: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        lens = ptr[rep + 1] - ptr[rep]
        return np.concatenate([[0], np.cumsum(lens)]), csr_rows(ptr, rep)

    src_ptr, src = rows(t.src_ptr)
    dst_ptr, dst = rows(t.dst_ptr)
    dep_ptr, dep = rows(t.dep_ptr)
    table = OpTable(
        kind=t.kind[rep], rank=t.rank[rep], count=t.count[rep], channel=t.channel[rep],
        step=t.step[rep], src_ptr=src_ptr, src_rank=t.src_rank[src],
        src_buffer=t.src_buffer[src], src_offset=t.src_offset[src], dst_ptr=dst_ptr,
        dst_rank=t.dst_rank[dst], dst_buffer=t.dst_buffer[dst], dst_offset=t.dst_offset[dst],
        dep_ptr=dep_ptr, dep_idx=sym.rep_of_op[t.dep_idx[dep]],
    )  # fmt: skip
    return Schedule(schedule.spec, schedule.algorithm, table, schedule.scratch_count,
                    schedule.params)  # fmt: skip


class _Representatives(CompiledSchedule):
    """The representatives compiled; their pipelining structure is the whole table's, moved
    onto them (a connection's previous op is another orbit's, not the previous representative)."""

    def __init__(self, whole: Schedule, sym: Symmetry, topology: Topology, net: Network) -> None:
        super().__init__(representatives(whole, sym), topology, None, net)
        #: the whole schedule
        self.whole = whole
        self._sym = sym

    def pipeline(self) -> Pipeline:
        if self._pipeline is None:
            t, sym = self.whole.table, self._sym
            dep_stream, streams_out, conn_pred, dep_order = stream_parts(t)
            rep = sym.rep_ops
            entries = csr_rows(t.dep_ptr, rep)
            dep_stream, dep_order = dep_stream[entries], dep_order[entries]
            order = np.argsort(self.dep_idx, kind="stable")  # the successor CSR's order
            conn = conn_pred[rep]
            self._pipeline = Pipeline(
                dep_stream[order], dep_stream, streams_out[rep],
                np.where(conn >= 0, sym.rep_of_op[np.maximum(conn, 0)], -1),
                dep_order, dep_order[order],
            )  # fmt: skip
        return self._pipeline


class TablePattern(Pattern):
    """A schedule's representative ops, compiled (see module). Build with :meth:`of`."""

    pipelined = True

    @property
    def whole(self) -> Schedule:
        """The whole schedule the representatives stand for."""
        compiled = self.compiled
        assert isinstance(compiled, _Representatives)  # noqa: S101 - built by of()
        return compiled.whole

    @staticmethod
    def symmetry(schedule: Schedule, topology: Topology, net: Network) -> Symmetry | None:
        """What :func:`~scaleup.sim.symmetry.find_symmetry` finds of ``schedule`` on the first
        ``n`` accelerators before any route: the same as it finds of the schedule compiled
        there (it reads the same table, devices and thread blocks), so a caller that compiles
        the whole schedule after :meth:`of` declines can hand it over
        (:meth:`~scaleup.sim.CompiledSchedule.adopt_symmetry`) instead of searching twice."""
        n = schedule.nranks
        if n < 2 or n > len(topology.accelerators) or not schedule.n_ops:
            return None
        return find_symmetry(TableBinding.of(schedule, topology, net))

    @classmethod
    def of(
        cls, schedule: Schedule, topology: Topology, network: Network | None = None
    ) -> TablePattern | None:
        """The pattern of ``schedule`` on the first ``n`` accelerators of ``topology``, or None
        where it has no symmetry or a check fails (the caller compiles the whole schedule)."""
        net = Network(topology) if network is None else network
        return cls.from_symmetry(schedule, topology, net, cls.symmetry(schedule, topology, net))

    @classmethod
    def from_symmetry(
        cls, schedule: Schedule, topology: Topology, net: Network, found: Symmetry | None
    ) -> TablePattern | None:
        """:meth:`of`, given what :meth:`symmetry` found of ``schedule`` on ``net``."""
        n = schedule.nranks
        if n < 2 or n > len(topology.accelerators) or not schedule.n_ops:
            return None
        base = net.n_constraints
        gens = [
            g for g in (found.generators if found is not None else ())
            if fabric_invariant(net, topology, g.sigma, g.con_image[:base])
        ]  # fmt: skip
        tags = int(schedule.table.channel.max(initial=0)) + 1
        while True:  # drop the generators whose routes do not follow, then again without them
            if not gens:
                return None
            same = found is not None and len(gens) == len(found.generators)
            sym = found if same and found is not None else symmetry_of(schedule.n_ops, tuple(gens))
            if sym.order < 2:
                return None
            moves = tuple(
                Move(g.sigma, g.con_image[:base], _tag_image(g.kappa, tags)) for g in gens
            )
            compiled = _Representatives(schedule, sym, topology, net)
            follow = [routes_follow(compiled, m) for m in moves]
            if all(follow):
                break
            gens = [g for g, ok in zip(gens, follow, strict=True) if ok]
        pattern = cls(compiled, sym.multiplicity.astype(np.float64), moves, schedule.n_ops, tags)
        if pattern.quotient(protocol("simple")) is None:  # orbits do not close: none will
            return None
        return pattern


def _tag_image(kappa: dict[int, int], tags: int) -> np.ndarray:
    image = np.full(tags, -1, dtype=np.int64)
    for a, b in kappa.items():
        image[a] = b
    return image
