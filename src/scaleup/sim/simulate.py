"""Time a Schedule on a Topology: a flow-level, max-min fair, event-batched simulation.

Semantics (docs/models.md has the whole model):

- The collective starts with the protocol's launch latency; an op is *ready* when all its
  dependencies are done. It then pays its latency (protocol step latency for its link class plus
  the route's link and device latencies; a switch reduction pays the NVLS latency), then moves
  its bytes at its max-min fair rate. Rates are recomputed whenever a transfer starts or ends;
  everything that starts or ends at one instant is one batch (engine tiers COMPLETE, START,
  RESOLVE), so a symmetric step of n ranks costs one rate solution, not n.
- A copy or reduce between two ranks is one LMM variable over its (multipath) route, the HBMs
  it reads and writes, and the issuing rank's channel (thread block) cap; a local copy or reduce
  only costs HBM bandwidth; a switch_reduce is one variable over every participant's links.
- Fair-share solutions are memoised by the multiset of active variables: the steps of a
  symmetric algorithm repeat the same set and are solved once.

:class:`CompiledSchedule` holds everything that does not depend on the protocol or the message
size (routes, variables, successor lists); :meth:`CompiledSchedule.run` times it for a protocol
and a scale factor of its element counts, which is what a tuner sweeping sizes wants. One run's
event handlers are :mod:`scaleup.sim.run`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from scaleup import hardware
from scaleup.arrays import unique
from scaleup.collectives.schedule import OpKind, OpTable, Schedule
from scaleup.collectives.spec import itemsize
from scaleup.errors import SimulationError, UsageError
from scaleup.sim import params as P
from scaleup.sim.binding import op_routes, rank_map, successors, usage_columns, variables
from scaleup.sim.factored import Factored, factor_groups
from scaleup.sim.fairshare import column_classes, get_solver, merge_constraints
from scaleup.sim.graph_channels import graph_channel_caps, network_cta_use
from scaleup.sim.memo import RateMemo
from scaleup.sim.network import LINK_CLASSES, Network
from scaleup.sim.pipeline import Pipeline, pipeline_structure
from scaleup.sim.protocols import Protocol, for_topology, host_launch_s, protocol
from scaleup.sim.quotient import Quotient
from scaleup.sim.run import Run, Slowed
from scaleup.sim.straggler import Stragglers
from scaleup.sim.symmetry import Symmetry, find_symmetry
from scaleup.sim.timeline import SimResult
from scaleup.topology.model import Topology

__all__ = ["CompiledSchedule", "compile_schedule", "simulate", "simulate_many"]


class CompiledSchedule:
    """A schedule bound to a topology: routes, LMM variables and successor lists, computed once.

    Parameters
    ----------
    schedule, topology
        What to time, and on what.
    ranks
        Schedule rank ``r`` runs on accelerator ``ranks[r]`` (default: the first n).
    network
        The topology's :class:`~scaleup.sim.network.Network` to add routes to, shared by every
        schedule compiled on it by one owner (a tuning session); default a new one.
    """

    def __init__(
        self,
        schedule: Schedule,
        topology: Topology,
        ranks: Sequence[int] | None = None,
        network: Network | None = None,
    ) -> None:
        if network is not None and network.topology != topology:
            raise UsageError("the network belongs to another topology", source="network")
        self.schedule = schedule
        self.topology = topology
        self.net: Network = Network(topology) if network is None else network
        self.rank_map = rank_map(schedule, topology, ranks)
        t = schedule.table
        n = self.n_ops = t.n_ops
        route, canon = op_routes(self.net, topology, t, self.rank_map)
        self.route = route
        # Route ids are global to the (shared) network, so their order depends on what its owner
        # compiled before; variables are ordered by a key of this schedule alone so that
        # the solver adds the same floats in the same order in every process (bit-for-bit runs).
        v = variables(route, canon, self.rank_map[t.rank], t.channel)
        self.cta_rank, self.cta_channel = v.cta_rank, v.cta_channel
        self.var_of_op, self.var_route, self.var_cta = v.var_of_op, v.var_route, v.var_cta
        self.n_vars = len(v.var_route)
        self.n_cta = len(v.cta_rank)
        self.n_deps = np.diff(t.dep_ptr).astype(np.int64)
        self.dep_ptr, self.dep_idx = t.dep_ptr, t.dep_idx
        self.succ_idx, self.succ_ptr = successors(t)
        routes = self.net.routes
        self.op_route_latency = (
            np.array([routes[r].latency_s for r in range(len(routes))])[route] if n else np.zeros(0)
        )
        self.op_class = (
            np.array([routes[r].link_class for r in range(len(routes))], dtype=np.int64)[route]
            if n
            else np.zeros(0, dtype=np.int64)
        )
        self.count = t.count.astype(np.float64)
        fabric = (t.kind == int(OpKind.SWITCH_REDUCE)) | (
            t.src_rank[t.src_ptr[:-1]] != t.dst_rank[t.dst_ptr[:-1]]
        )
        #: NVLS-only schedules pay no ring base latency: NCCL's baseLatencies NVLS = 0, its whole
        #: latency is the switch step (P.SWITCH_STEP_LATENCY_S)
        self.nvls_only = bool(fabric.any() and np.all(t.kind[fabric] == int(OpKind.SWITCH_REDUCE)))
        self.switch_share = switch_latency_share(t)
        self._per_protocol: dict[str, tuple[Any, ...]] = {}
        self._bound_per_count: dict[str, float] = {}
        self._merged_cache: dict[str, tuple[np.ndarray, ...]] = {}
        self._factored_cache: dict[str, Factored | None] = {}
        self._classes: dict[str, np.ndarray] = {}
        self._pipeline: Pipeline | None = None
        self._symmetry: Symmetry | None = None
        self._symmetry_searched = False
        self._quotients: dict[str, Quotient | None] = {}
        self._slowed: dict[tuple[object, ...], Slowed] = {}
        self._leg_caps: np.ndarray | None = None
        self._cta_uses: dict[str, np.ndarray | None] = {}

    # ---- protocol-dependent pieces --------------------------------------------------------
    def system(self, proto: Protocol) -> tuple[Any, np.ndarray, np.ndarray, dict[bytes, Any]]:
        """(usage columns, capacity, per-op latency, rate memo) for one protocol, cached.

        The usage columns are CSC arrays ``(col_ptr, row, use, carried)``: ``use`` is capacity
        consumed per byte/s of the variable, ``carried`` the payload bytes counted as carried.
        The memo maps the active variables (by column class, :meth:`var_classes`) and their
        counts to the max-min solution; it is shared by
        every run of this protocol (rates do not depend on message size)."""
        hit = self._per_protocol.get(proto.name)
        if hit is not None:
            return hit
        proto = for_topology(proto, self.topology, self.rank_map)  # NCCL's or RCCL's constants
        net = self.net
        system = usage_columns(net, self.var_route, self.var_cta, proto, self._cta_use(proto))
        capacity = np.r_[net.capacity, self._own_cta_caps(proto)]
        latency = self._step_latency(proto) + self.op_route_latency
        memo: dict[bytes, Any] = RateMemo()  # every run of this protocol's, within a budget
        out = (system, capacity, latency, memo)
        self._per_protocol[proto.name] = out
        return out

    def tree_leg_caps(self) -> np.ndarray:
        """Per thread block, the most payload per second it moves as the tree leg of a
        two-server NVLS-Tree (tag ``2c + 1``, :mod:`scaleup.collectives.algorithms.nvls_tree`),
        else inf: NCCL's per-head rate (:data:`~scaleup.sim.params.NVLS_TREE_BUS_BYTES_PER_S`
        x N / 2(N - 1)) over the channels the head issues the leg on. With two servers the root
        of a channel's tree issues its leg both ways, and each head is the root of the channels
        of one parity: ceil(k / 2) of them for tree 0, floor(k / 2) for tree 1. Read from the
        schedule's parameters, so a pattern's representatives get the whole schedule's caps."""
        if self._leg_caps is not None:
            return self._leg_caps
        caps = self._leg_caps = np.full(self.n_cta, np.inf)
        s = self.schedule
        g, n = s.params.get("ranks_per_node"), s.nranks
        if s.algorithm != "nvls_tree" or not g or n != 2 * int(g):
            return caps
        k = int(s.params.get("channels", 1))
        accs = self.topology.accelerators
        bus_of_type: dict[str, float] = {}
        for acc in {accs[int(r)].type for r in unique(self.cta_rank).tolist()}:
            arch = P.ARCH_ALIASES.get(str(hardware.accelerator(acc).arch), "")
            bus_of_type[acc] = P.NVLS_TREE_BUS_BYTES_PER_S.get(arch, np.inf)
        bus = np.array([bus_of_type[accs[int(r)].type] for r in self.cta_rank.tolist()])
        tag = self.cta_channel.astype(np.int64)
        rooted = np.where(tag // 2 % 2 == 0, (k + 1) // 2, k // 2)
        leg = (tag % 2 == 1) & np.isfinite(bus)
        caps[leg] = (bus * n / (2 * (n - 1)) / np.maximum(rooted, 1))[leg]
        return caps

    def _cta_use(self, proto: Protocol) -> np.ndarray | None:
        """Per variable, its use of its thread block per byte/s where NCCL's per-graph-channel
        cap weighs its network transfers (:func:`~scaleup.sim.graph_channels.network_cta_use`),
        else None (every use 1); once per protocol (every result's constraint names ask)."""
        if proto.name in self._cta_uses:
            return self._cta_uses[proto.name]
        adapted = for_topology(proto, self.topology, self.rank_map)
        use = None
        if adapted.library == "nccl":
            use = network_cta_use(self.graph_channel_caps(adapted), self._own_cta_caps(adapted),
                                  self.var_cta, self.var_route, self.net.routes)  # fmt: skip
        self._cta_uses[proto.name] = use
        return use

    def _own_cta_caps(self, proto: Protocol) -> np.ndarray:
        """Per thread block, its capacity for ``proto`` (adapted to the library): the
        architecture's per-block rate, NCCL's NVLS-Tree head rate where it applies."""
        accs = self.topology.accelerators
        cap = np.array([proto.cta_bytes_per_s(str(hardware.accelerator(accs[int(r)].type).arch))
                        for r in self.cta_rank])  # fmt: skip
        return np.minimum(cap, self.tree_leg_caps()) if proto.library == "nccl" else cap

    def graph_channel_caps(self, proto: Protocol) -> np.ndarray:
        """Per thread block, its share of NCCL's per-graph-channel cap for ``proto``
        (:func:`~scaleup.sim.graph_channels.graph_channel_caps`), else inf."""
        lib = for_topology(proto, self.topology, self.rank_map).library
        s = self.schedule
        return graph_channel_caps(s.algorithm, s.params, proto.name, lib,
                                  self.topology, self.rank_map, self.cta_rank,
                                  self.cta_channel)  # fmt: skip

    def cta_names(self, proto: Protocol | None = None) -> tuple[str, ...]:
        """Each thread block's constraint name: ``r<accelerator>.cta``,
        ``r<accelerator>.nvls-tree-leg`` where NCCL's NVLS-Tree head rate caps it
        (:meth:`tree_leg_caps`), or, for ``proto``, ``r<accelerator>.graph-channel`` where its
        network transfers take a share of NCCL's per-graph-channel cap
        (:meth:`graph_channel_caps`)."""
        leg = np.isfinite(self.tree_leg_caps())
        shared = np.zeros(self.n_cta, dtype=bool)
        if proto is not None:
            use = self._cta_use(proto)
            if use is not None:
                shared[self.var_cta[use > 1.0]] = True
                shared &= ~leg
        return tuple(
            f"r{int(r)}.{'nvls-tree-leg' if capped else 'graph-channel' if sh else 'cta'}"
            for r, capped, sh in zip(
                self.cta_rank.tolist(), leg.tolist(), shared.tolist(), strict=True
            )
        )

    def _step_latency(self, proto: Protocol) -> np.ndarray:
        """Per op, the protocol's step latency for its link class (``proto`` already adapted to
        the topology's library by :func:`~scaleup.sim.protocols.for_topology`)."""
        step = np.array([proto.step_latency_s.get(c, 0.0) for c in LINK_CLASSES])
        step[LINK_CLASSES.index("switch")] = P.SWITCH_STEP_LATENCY_S
        return step[self.op_class] * self.switch_share

    def slowed(self, proto: Protocol, stragglers: Stragglers) -> Slowed:
        """The protocol's system with ``stragglers`` applied (:mod:`scaleup.sim.straggler`):
        slow accelerators' constraints divided by their factor, the step latency of every op
        they take part in multiplied by it, and every op's release time; cached."""
        key = (proto.name, stragglers.key)
        hit = self._slowed.get(key)
        if hit is not None:
            return hit
        nranks = self.schedule.spec.nranks
        stragglers.check(nranks)
        system, capacity, _latency, _memo = self.system(proto)
        capacity = capacity / stragglers.capacity_factor(
            self.net, self.rank_map, self.cta_rank, nranks
        )
        t = self.schedule.table
        step = self._step_latency(for_topology(proto, self.topology, self.rank_map))
        op_factor = stragglers.op_ranks_max(t, stragglers.rank_factor(nranks))
        latency = step * op_factor + self.op_route_latency
        release_s = self.start_s(proto) + stragglers.op_ranks_max(t, stragglers.rank_skew_s(nranks))
        merged = merge_constraints(system, capacity)
        hit = self._slowed[key] = Slowed(system, capacity, latency, RateMemo(), merged, release_s)
        return hit

    def merged_system(self, proto: Protocol) -> tuple[np.ndarray, ...]:
        """The protocol's system with interchangeable constraints merged
        (:func:`~scaleup.sim.fairshare.merge_constraints`), cached; only runs need it."""
        hit = self._merged_cache.get(proto.name)
        if hit is None:
            system, capacity, _latency, _memo = self.system(proto)
            hit = self._merged_cache[proto.name] = merge_constraints(system, capacity)
        return hit

    def factored_system(self, proto: Protocol) -> Factored | None:
        """The merged system with group rows (:func:`~scaleup.sim.factored.factor_groups`),
        cached; None where it has none worth having."""
        if proto.name not in self._factored_cache:
            self._factored_cache[proto.name] = factor_groups(self.merged_system(proto))
        return self._factored_cache[proto.name]

    def var_classes(self, proto: Protocol) -> np.ndarray:
        """The protocol's variables by column (:func:`~scaleup.sim.fairshare.column_classes`:
        the key of the rate memo), cached."""
        hit = self._classes.get(proto.name)
        if hit is None:
            hit = self._classes[proto.name] = column_classes(self.system(proto)[0])
        return hit

    def pipeline(self) -> Pipeline:
        """Cut-through edges and connection order (:mod:`scaleup.sim.pipeline`), cached."""
        if self._pipeline is None:
            self._pipeline = pipeline_structure(self.schedule.table)
        return self._pipeline

    def symmetry(self) -> Symmetry | None:
        """The rank shift this schedule is invariant under (:mod:`scaleup.sim.symmetry`), cached."""
        if not self._symmetry_searched:
            self._symmetry = find_symmetry(self)
            self._symmetry_searched = True
        return self._symmetry

    def adopt_symmetry(self, found: Symmetry | None) -> None:
        """Take ``found`` as :meth:`symmetry`'s result: what
        :meth:`~scaleup.sim.table_pattern.TablePattern.symmetry` found of this schedule on the
        first ``n`` accelerators, before any route (the same search on the same inputs)."""
        if not np.array_equal(self.rank_map, np.arange(self.schedule.nranks)):
            raise UsageError("a symmetry found on the first n accelerators does not fit a group",
                             source="symmetry")  # fmt: skip
        self._symmetry, self._symmetry_searched = found, True

    def quotient(self, proto: Protocol) -> Quotient | None:
        """The flow-class quotient for ``proto`` (None: no symmetry, run every flow), cached."""
        if proto.name not in self._quotients:
            sym = self.symmetry()
            self._quotients[proto.name] = None if sym is None else Quotient.of(self, sym, proto)
        return self._quotients[proto.name]

    def start_s(self, proto: Protocol) -> float:
        """When the roots are released: host launch (:data:`~scaleup.sim.params.KERNEL_LAUNCH_S`)
        plus the protocol's base latency (none for NVLS-only schedules)."""
        proto = for_topology(proto, self.topology, self.rank_map)  # NCCL's or RCCL's base latency
        return host_launch_s(self.topology) + (0.0 if self.nvls_only else proto.launch_latency_s)

    def lower_bound_s(
        self, protocol_name: str = "simple", *, dtype: str = "float32", scale: float = 1.0
    ) -> float:
        """A lower bound of ``run(...).time_s`` without simulating (for pruning a tuner).

        Launch latency plus the congestion bound: every constraint (channel, HBM, thread block)
        must carry all the bytes the ops put on it, at most at its capacity, so the run takes at
        least ``max_c sum_ops use[c, op] * bytes(op) / capacity[c]``. Exact for one saturated
        resource; it ignores dependencies and latency, so it is never above the simulated time.
        """
        proto = protocol(protocol_name)
        if not self.n_ops:
            return self.start_s(proto)
        unit = self._bound_per_count.get(proto.name)
        if unit is None:  # seconds per (count x bytes per element) at scale 1: linear in both
            (col_ptr, row, use, _carried), capacity, _lat, _memo = self.system(proto)
            var_count = np.bincount(self.var_of_op, weights=self.count, minlength=self.n_vars)
            per_entry = use * np.repeat(var_count, np.diff(col_ptr))
            unit = float(
                (np.bincount(row, weights=per_entry, minlength=len(capacity)) / capacity).max()
            )
            self._bound_per_count[proto.name] = unit
        return float(self.start_s(proto) + unit * itemsize(dtype) * float(scale))

    def run(
        self,
        protocol_name: str = "simple",
        *,
        dtype: str = "float32",
        scale: float = 1.0,
        solver: str = "maxmin",
        step_bytes: float | None = None,
        exact: bool = False,
        stragglers: Stragglers | None = None,
    ) -> SimResult:
        """Time the schedule with ``protocol_name``, every op's count multiplied by ``scale``.

        ``exact``: simulate every flow and every event, even where the schedule is invariant
        under a rank shift (by default such a schedule runs as flow classes,
        :mod:`scaleup.sim.symmetry`, and whole periods of a steady state are skipped,
        :mod:`scaleup.sim.recurrence`; the results agree up to floating-point rounding).

        ``step_bytes``: pipeline the connections in steps of that many bytes (NCCL's slot size;
        :mod:`scaleup.sim.pipeline`): a fabric op may start once the fabric op it depends on has
        moved one step, and a connection's ops overlap their latency with the previous op's
        bytes. None (default): every dependency waits for its predecessor's end.

        ``stragglers``: slow and late ranks (:class:`~scaleup.sim.straggler.Stragglers`); such a
        run is always exact (a straggler breaks the rank-shift symmetry) and keeps every
        connection in order even without ``step_bytes`` (an unpipelined run then has
        ``step_bytes`` = infinity: no early release, but a connection's next op waits for the
        previous one's bytes, as an NCCL connection is a FIFO; without it, the ops of several
        ring steps queue on a slow rank's links at once and share them, which no library does).
        None, or factors of 1 and skews of 0, run exactly as without."""
        proto = protocol(protocol_name)
        if proto.name != "simple" and np.any(self.op_class == LINK_CLASSES.index("switch")):
            raise SimulationError(
                "nvls (switch_reduce) runs with the simple protocol only", source=proto.name
            )
        if step_bytes is not None and not step_bytes > 0:
            raise UsageError(f"step_bytes must be > 0, got {step_bytes!r}", source="step_bytes")
        bytes_per_count = itemsize(dtype) * float(scale)
        if stragglers is not None and not stragglers.is_identity:
            slowed = self.slowed(proto, stragglers)
            in_order = math.inf if step_bytes is None else step_bytes
            return Run(self, proto, bytes_per_count, get_solver(solver), in_order, slowed).result()
        quotient = None if exact or solver != "maxmin" else self.quotient(proto)
        runs_on: CompiledSchedule | Quotient = self if quotient is None else quotient
        return Run(runs_on, proto, bytes_per_count, get_solver(solver), step_bytes,
                   fast_forward=not exact).result()  # fmt: skip


def switch_latency_share(t: OpTable) -> np.ndarray:
    """Per op, the share of its step latency it pays: 1, but 1/2 for the in-switch ops of a
    channel that splits NVLS's pair into a reduction into one rank and a separate multicast
    from one rank (NVLS-Tree: ``multimem.ld_reduce`` into the head, the network, then
    ``multimem.st``). NCCL's NVLS latency (hwLat NVLS 25 us) is one ld_reduce + st pair, and
    its model charges NVLS_TREE that ``intraLat`` once (tuning.cc lines 427-428: ``intraLat +
    2 log2(nNodes) interLat``), as it charges NVLS all_reduce, all_gather and reduce_scatter
    (one switch op each, lines 424-426). By channel, so that an NVLS reduce_scatter and an NVLS
    all_gather run together as jobs (their channels renumbered apart) keep a whole step each."""
    share = np.ones(t.n_ops)
    switch = t.kind == int(OpKind.SWITCH_REDUCE)
    if not switch.any():
        return share
    n_src, n_dst = np.diff(t.src_ptr), np.diff(t.dst_ptr)
    into_one = switch & (n_src > 1) & (n_dst == 1)
    out_of_one = switch & (n_src == 1) & (n_dst > 1)
    if into_one.any() and out_of_one.any():
        both = np.intersect1d(t.channel[into_one], t.channel[out_of_one])
        share[(into_one | out_of_one) & np.isin(t.channel, both)] = 0.5
    return share


def compile_schedule(
    schedule: Schedule,
    topology: Topology,
    *,
    ranks: Sequence[int] | None = None,
    network: Network | None = None,
) -> CompiledSchedule:
    """Bind ``schedule`` to ``topology`` once, to run it for several protocols or sizes
    (``network``: see :class:`CompiledSchedule`)."""
    return CompiledSchedule(schedule, topology, ranks, network)


def simulate(
    schedule: Schedule,
    topology: Topology,
    *,
    dtype: str = "float32",
    protocol: str = "simple",
    ranks: Sequence[int] | None = None,
    solver: str = "maxmin",
) -> SimResult:
    """Time ``schedule`` on ``topology``.

    Parameters
    ----------
    schedule
        The algorithm as data (its counts are elements of ``dtype``).
    topology
        The fabric.
    dtype
        Element type (sets the bytes per element).
    protocol
        ``simple``, ``ll`` or ``ll128``.
    ranks
        Schedule rank ``r`` runs on accelerator ``ranks[r]`` (default: the first n).
    solver
        Fair-sharing solver from :data:`scaleup.sim.fairshare.SOLVERS`.

    Returns
    -------
    SimResult

    Examples
    --------
    >>> from scaleup.collectives.spec import CollectiveSpec
    >>> from scaleup.collectives.build import ScheduleBuilder
    >>> from scaleup.topology import resolve_topology
    >>> b = ScheduleBuilder(CollectiveSpec("send_recv", nranks=2, count=2**20), "p2p")
    >>> _ = b.copy(b.input(0, 0, 2**20), b.output(1, 0, 2**20))
    >>> r = simulate(b.build(), resolve_topology("dgx-h100"))
    >>> round(r.time_us, 1) > 0
    True
    """
    return CompiledSchedule(schedule, topology, ranks).run(protocol, dtype=dtype, solver=solver)


def simulate_many(
    schedule: Schedule,
    topology: Topology,
    sizes_bytes: Sequence[float],
    *,
    dtype: str = "float32",
    protocol: str = "simple",
    ranks: Sequence[int] | None = None,
    solver: str = "maxmin",
) -> list[SimResult]:
    """Time one schedule structure at several message sizes by rescaling its counts.

    The schedule is compiled once; size ``s`` runs with every count scaled by
    ``s / (spec.count * itemsize)``. Exact when the schedule's counts are proportional to its
    spec count (build it at a count divisible by its blocks, e.g. a large power of two).
    """
    size = schedule.spec.count * itemsize(dtype)
    if size <= 0:
        raise UsageError("simulate_many needs a schedule with a nonzero count", source="sizes")
    compiled = CompiledSchedule(schedule, topology, ranks)
    return [
        compiled.run(protocol, dtype=dtype, scale=float(s) / size, solver=solver)
        for s in sizes_bytes
    ]
