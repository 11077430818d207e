"""The state of one tuning question: its structures built, checked, compiled and timed once.

Split from :mod:`scaleup.tune.search` (the :class:`~scaleup.tune.search.TuneSession` that owns
these questions and documents the search) so that what one question (topology, collective, group
of ranks, dtype, redop, root) keeps -- builder parameters, compiled reference structures,
timings, failures and lower bounds -- reads apart from the session and the pass over sizes.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from scaleup.collectives.algorithms import build_schedule, ring
from scaleup.collectives.algorithms.ring import ROW_BUILDERS
from scaleup.collectives.schedule import Schedule
from scaleup.collectives.spec import CollectiveSpec, itemsize
from scaleup.errors import LimitError, ScheduleError, SimulationError
from scaleup.sim import CompiledSchedule, SimResult, compile_schedule
from scaleup.sim.nvls_tree_pattern import NvlsTreePattern
from scaleup.sim.pattern import Pattern, RingPattern
from scaleup.sim.protocols import protocol
from scaleup.sim.steady_pipeline import SteadyPipeline
from scaleup.sim.steady_ring import STEADY_COLLECTIVES, SteadyRing, servers_relay
from scaleup.sim.table_pattern import TablePattern
from scaleup.topology.model import Topology
from scaleup.tune.bounds import GroupFabric, lower_bound_s
from scaleup.tune.channel_plan import ChannelPlan
from scaleup.tune.channel_search import nvls_heads
from scaleup.tune.checks import REFERENCE_BLOCKS, VERIFY_MAX_OPERANDS, VERIFY_MAX_OPS
from scaleup.tune.nccl_buffers import NcclBuffers
from scaleup.tune.nccl_inputs import model_inputs
from scaleup.tune.nccl_model import ModelInputs
from scaleup.tune.nvls import nvls_tree_params
from scaleup.tune.ofi_env import plugin_buffers
from scaleup.tune.rules import Candidate, chunks_for, step_bytes_for
from scaleup.tune.size_channels import nvls_tree_chunk_bytes, tree_ll128_chunk_for, tree_ll128_shape

if TYPE_CHECKING:
    from scaleup.tune.search import TuneSession

__all__ = ["PATTERN_MIN_RANKS", "STEADY_MIN_CHAINS", "STEADY_MIN_TREE_OPS", "Question", "Timed"]

#: Smallest world size whose structures are timed from their representatives: a ring
#: all_reduce / all_gather / reduce_scatter from its representative chains and NVLS-Tree from
#: its representative slices, never built in full (:class:`~scaleup.sim.pattern.RingPattern`,
#: :class:`~scaleup.sim.nvls_tree_pattern.NvlsTreePattern`), any other schedule from one op per
#: orbit of its symmetry, routed alone (:class:`~scaleup.sim.table_pattern.TablePattern`): 4
#: servers of 8. Below, the whole table is small (~20k ops) and costs milliseconds; from here on
#: a ring grows as ranks^2 x channels (25 million ops at 1,024 ranks x 8 channels), NVLS-Tree
#: as ranks x channels x chunks (16.8 million ops at 16,384 GPUs).
PATTERN_MIN_RANKS = 32

#: Most chains a ring's event loop steps (its representative chains where its pattern holds,
#: else every lane's ``n`` chains); above, a ring all_reduce / all_gather / reduce_scatter is
#: timed in steady state (:mod:`scaleup.sim.steady_ring`, an approximation). Chains that no
#: symmetry maps onto one another drift apart, and the event loop solves at almost every
#: transfer's end: 1,296 chains (18 channels on 2 x 36 GB200) take ~200,000 solves, ~190 s for
#: one size, 7,776 (8 NVL72 racks) never end; the 96 of a 1,024-rank UALink ring take 6 s, the
#: 48 of 16 DGX H100 under a second. ``--exact`` and ``--explain`` keep the event loop.
STEADY_MIN_CHAINS = 512

#: Most ops a pipelined tree all_reduce's event loop steps per chunk (one op per orbit of the
#: symmetry :class:`~scaleup.sim.table_pattern.TablePattern` finds in its one-chunk table, else
#: every op); above, the tree is timed in steady state (:mod:`scaleup.sim.steady_pipeline`, an
#: approximation). 2 x 36 GB200 with 18 channels keep 3,834 (the event loop: ~60 s a size), two
#: full racks 7,722 (~200 s), 20 racks 77,706; 16 DGX H100 keep 381, a 128-rank UALink pod 381.
STEADY_MIN_TREE_OPS = 2048

Steady = SteadyRing | SteadyPipeline

Structure = CompiledSchedule | Pattern


@dataclass(frozen=True)
class Timed:
    """One candidate's simulated time at one size, the pipeline depth it ran at, its result."""

    time_s: float
    chunks: int
    result: SimResult


class Question:
    """The state of one question: (topology, collective, group, dtype, redop, root).

    Each (algorithm, channels, chunks) is built once at a reference count divisible by all its
    blocks and compiled once; a size is then timed by scaling every op's count
    (``CompiledSchedule.run(scale=)``), exact where the size's count divides like the reference
    and within a fraction of an element per op otherwise. Count 0 (nccl-tests' size-0 rows) runs
    the structure with zero bytes: launch and step latency only, as NCCL still launches the kernel.
    """

    def __init__(
        self,
        session: TuneSession,
        topology: Topology,
        key: tuple[str, tuple[int, ...] | None, str, str, int],
        *,
        buffers: NcclBuffers | None = None,
    ) -> None:
        self.session = session
        self.topology = topology
        self.collective, self.group, self.dtype, self.redop, self.root = key
        #: NCCL's buffer and chunk sizes for this group: the request's over the network
        #: plugin's (:func:`~scaleup.tune.ofi_env.plugin_buffers`, the default)
        self.buffers = plugin_buffers(topology, self.group) if buffers is None else buffers
        self.shape = session.shape(topology, self.group)
        self.nranks = self.shape.nranks
        self.compiled: dict[tuple[str, int, int], Structure] = {}
        self.timed: dict[tuple[Candidate, int], Timed] = {}
        self.failed: dict[tuple[str, int, int], str] = {}
        self._fabric: GroupFabric | None = None
        self._bounds: dict[tuple[Candidate, int], float] = {}
        self._params: dict[tuple[str, int], dict[str, Any]] = {}
        self._nccl_model: tuple[ModelInputs | None] | None = None
        self._heads: ChannelPlan | None = None
        #: rings and trees timed in steady state, by structure (:meth:`_steady`)
        self.steady: dict[tuple[str, int, int], Steady] = {}
        self._servers_relay: bool | None = None
        self._tree_ll128_nodes: tuple[tuple[int, float] | None] | None = None

    def reference_count(self, channels: int, chunks: int) -> int:
        return self.nranks * channels * chunks * REFERENCE_BLOCKS

    def params(self, algorithm: str, channels: int) -> dict[str, Any]:
        """The builder parameters of (``algorithm``, ``channels``) on this group, once."""
        key = (algorithm, 0 if algorithm == "nvls_tree" else channels)
        params = self._params.get(key)
        if params is None:
            if algorithm == "nvls_tree":  # server size and one head per NIC
                params = nvls_tree_params(self.topology, self.group, self.nvls_heads())
            else:
                params = self.shape.params(algorithm, channels)
            graph = self._graph_channels(algorithm)
            if graph:
                params = {**params, "graph_channels": graph}
            self._params[key] = params
        return params

    def _graph_channels(self, algorithm: str) -> int | None:
        """NCCL's searched channels of a ring or tree on this group (its model's graph,
        :meth:`nccl_model`), which the simulator shares NCCL's per-channel caps over
        (:mod:`scaleup.sim.graph_channels`); None for other algorithms and libraries."""
        if algorithm not in ("ring", "tree"):
            return None
        inputs = self.nccl_model()
        if inputs is None or inputs.rccl is not None or algorithm not in inputs.graphs:
            return None
        return inputs.graphs[algorithm].n_channels or None

    def build(self, algorithm: str, count: int, channels: int, chunks: int) -> Schedule:
        spec = CollectiveSpec(self.collective, self.nranks, count, root=self.root, redop=self.redop)
        params = self.params(algorithm, channels)
        return build_schedule(algorithm, spec, channels=channels, chunks=chunks, **params)

    def compiled_for(self, algorithm: str, channels: int, chunks: int) -> Structure | None:
        """The reference structure, compiled once, unchecked (only explanations of pruned
        candidates ask: the search itself never builds a structure to bound it); None when it
        cannot be built or compiled."""
        key = (algorithm, channels, chunks)
        if key not in self.compiled:
            try:
                count = self.reference_count(channels, chunks)
                self.compiled[key] = self._compile(self.build(algorithm, count, channels, chunks))
            except (ScheduleError, SimulationError, LimitError):
                return None
        return self.compiled[key]

    def _compile(self, schedule: Schedule) -> CompiledSchedule:
        network = self.session.network(self.topology)
        return compile_schedule(schedule, self.topology, ranks=self.group, network=network)

    def checked_for(self, algorithm: str, channels: int, chunks: int) -> Structure | Steady:
        """The reference structure, checked in lanes before it is first compiled: built from
        its representatives where :meth:`_pattern` holds, else a ring or tree in steady state
        where :meth:`_steady` takes it, else built in full and compiled as one op per orbit where
        :class:`~scaleup.sim.table_pattern.TablePattern` holds, else compiled whole (with the
        symmetry that search found)."""
        key = (algorithm, channels, chunks)
        hit = self.steady.get(_steady_key(key))
        if hit is not None:
            return hit
        compiled = self.compiled.get(key)
        if isinstance(compiled, Pattern):
            return compiled
        if compiled is None:
            pattern = self._pattern(algorithm, channels, chunks)
            if pattern is not None:
                self._check_pattern(pattern)
                self.compiled[key] = pattern
                return pattern
            steady = self._steady(algorithm, channels, chunks)
            if steady is not None:
                self.steady[_steady_key(key)] = steady
                return steady
        schedule = (
            compiled.schedule
            if compiled is not None
            else self.build(algorithm, self.reference_count(channels, chunks), channels, chunks)
        )
        self.session.checked.check_lanes(schedule)
        if compiled is None:
            compiled = self.compiled[key] = self._compile_checked(schedule)
        return compiled

    def _compile_checked(self, schedule: Schedule) -> Structure:
        """The schedule compiled as one op per orbit
        (:class:`~scaleup.sim.table_pattern.TablePattern`) where patterns are allowed and it
        holds, else whole, with the symmetry that search found (not searched again)."""
        if not self._patterns_allowed():
            return self._compile(schedule)
        net = self.session.network(self.topology)
        found = TablePattern.symmetry(schedule, self.topology, net)
        table = TablePattern.from_symmetry(schedule, self.topology, net, found)
        if table is not None:
            return table
        whole = self._compile(schedule)
        whole.adopt_symmetry(found)
        return whole

    def _patterns_allowed(self) -> bool:
        """Whether structures may be timed from representatives: at least
        :data:`PATTERN_MIN_RANKS` ranks over every accelerator, in a session that is not exact
        or explaining (explanations read the whole table) and has no stragglers (they break
        the symmetry)."""
        s = self.session
        return (self.group is None and self.nranks >= PATTERN_MIN_RANKS and not s.exact
                and s.observer is None and s.stragglers is None)  # fmt: skip

    def _pattern(self, algorithm: str, channels: int, chunks: int) -> Pattern | None:
        """The structure's representatives, built without the whole table, when patterns are
        allowed (:meth:`_patterns_allowed`) and the pattern holds: a ring all_reduce /
        all_gather / reduce_scatter's chains (:class:`~scaleup.sim.pattern.RingPattern`),
        NVLS-Tree's slices (:class:`~scaleup.sim.nvls_tree_pattern.NvlsTreePattern`); else
        None."""
        ring = algorithm == "ring" and self.collective in ROW_BUILDERS and chunks == 1
        if not (ring or algorithm == "nvls_tree") or not self._patterns_allowed():
            return None
        count = self.reference_count(channels, chunks)
        spec = CollectiveSpec(self.collective, self.nranks, count, root=self.root, redop=self.redop)
        params = {"channels": channels, "chunks": chunks, **self.params(algorithm, channels)}
        network = self.session.network(self.topology)
        if ring:
            return RingPattern.of(
                algorithm, spec, params, self.topology, network, max_chains=STEADY_MIN_CHAINS
            )
        return NvlsTreePattern.of(spec, params, self.topology, network)

    def _steady(self, algorithm: str, channels: int, chunks: int) -> Steady | None:
        """The structure in steady state where the event loop would step drifting chains: a
        ring (:meth:`_steady_ring`) or a pipelined tree all_reduce (:meth:`_steady_tree`), on
        servers whose accelerators all reach one another without relaying through a third
        memory (:func:`~scaleup.sim.steady_ring.servers_relay`: not on tori, where it was
        found 12-26% off the event loop)."""
        if algorithm not in ("ring", "tree") or not self._patterns_allowed():
            return None
        if self._servers_relay is None:
            network = self.session.network(self.topology)
            self._servers_relay = servers_relay(network, np.arange(self.nranks))
        if self._servers_relay:
            return None
        if algorithm == "tree":
            return self._steady_tree(channels)
        return self._steady_ring(algorithm, channels, chunks)

    def _steady_tree(self, channels: int) -> SteadyPipeline | None:
        """The pipelined tree all_reduce in steady state
        (:class:`~scaleup.sim.steady_pipeline.SteadyPipeline`, built from its one-chunk table)
        where that table keeps more than :data:`STEADY_MIN_TREE_OPS` ops after its symmetry;
        else None."""
        if self.collective != "all_reduce":
            return None
        one = self.build("tree", self.reference_count(channels, 1), channels, 1)
        net = self.session.network(self.topology)
        found = TablePattern.symmetry(one, self.topology, net)
        if (one.n_ops if found is None else len(found.rep_ops)) <= STEADY_MIN_TREE_OPS:
            return None
        try:
            return SteadyPipeline(self._compile(one))
        except SimulationError:  # ops not in dependency order: the event loop times it
            return None

    def _steady_ring(self, algorithm: str, channels: int, chunks: int) -> SteadyRing | None:
        """The ring in steady state (:class:`~scaleup.sim.steady_ring.SteadyRing`) where the
        event loop would step drifting chains: a ring all_reduce / all_gather / reduce_scatter
        of one chunk with more than :data:`STEADY_MIN_CHAINS` chains whose pattern did not hold
        within that many (:meth:`_pattern`); else None."""
        if not (algorithm == "ring" and self.collective in STEADY_COLLECTIVES and chunks == 1):
            return None
        spec = CollectiveSpec(
            self.collective, self.nranks, self.reference_count(channels, chunks),
            root=self.root, redop=self.redop,
        )  # fmt: skip
        params = ring.normalise(spec, {**self.params(algorithm, channels), "channels": channels,
                                       "chunks": chunks})  # fmt: skip
        if params["channels"] * (1 + params["bidirectional"]) * self.nranks <= STEADY_MIN_CHAINS:
            return None
        ranks = np.arange(self.nranks)  # patterns allowed: the group is every accelerator
        network = self.session.network(self.topology)
        return SteadyRing(
            self.collective,
            ring.lanes(self.nranks, params),
            self.topology,
            ranks,
            network,
            params=params,
        )

    def _check_pattern(self, pattern: Pattern) -> str:
        """The lanes check of a pattern's structure (its ``params`` are the whole schedule's;
        ``"unchecked"`` where it is too large to replay: a ring's two lanes are known to be
        before they are built)."""
        n = self.nranks
        if isinstance(pattern, RingPattern) and 3 * 2 * n * (n - 1) > VERIFY_MAX_OPS:
            return "unchecked"
        return self.session.checked.check_lanes(pattern.schedule)

    def confirm(self, cand: Candidate, chunks: int) -> str | None:
        """The exact check of a chosen structure: its verdict, or None (and the structure marked
        failed) when it is wrong."""
        structure = (cand.algorithm, cand.channels, chunks)
        try:
            steady = self.steady.get(_steady_key(structure))
            if isinstance(steady, SteadyPipeline):  # its one-chunk table, where small enough
                one = steady.c.schedule
                if one.n_ops > VERIFY_MAX_OPS:
                    return "unchecked"
                return self.session.checked.check_exact(one)
            if steady is not None:  # the ring's whole table, where small enough to replay
                n = self.nranks
                if 3 * 2 * n * (n - 1) > VERIFY_MAX_OPS:
                    return "unchecked"
                count = self.reference_count(cand.channels, chunks)
                whole = self.build(cand.algorithm, count, cand.channels, chunks)
                return self.session.checked.check_exact(whole)
            compiled = self.compiled[structure]
            if isinstance(compiled, TablePattern):
                return self.session.checked.check_exact(compiled.whole)
            if isinstance(compiled, Pattern):  # built from representatives: the whole table
                if compiled.n_operands_full > VERIFY_MAX_OPERANDS:  # only where small enough to
                    return self._check_pattern(compiled)  # replay (the exact check's rule)
                count = self.reference_count(cand.channels, chunks)
                whole = self.build(cand.algorithm, count, cand.channels, chunks)
                return self.session.checked.check_exact(whole)
            return self.session.checked.check_exact(compiled.schedule)
        except ScheduleError as error:
            self.failed[structure] = error.one_line()
            return None

    def prepare(self, cand: Candidate, nbytes: int) -> bool:
        """Build, check and compile the structure ``cand`` runs at ``nbytes`` (what
        :meth:`simulate` does first), so that its congestion bound is known before it is run;
        False when it cannot be (the reason is kept in ``failed``)."""
        chunks = self.chunks(cand, nbytes)
        structure = (cand.algorithm, cand.channels, chunks)
        if structure in self.failed:
            return False
        try:
            self.checked_for(*structure)
        except (ScheduleError, SimulationError, LimitError) as error:  # unsupported, wrong or
            # too large to build here (MAX_SCHEDULE_OPS, memory): never trusted, never fatal
            self.failed[structure] = error.one_line()
            return False
        return True

    def simulate(self, cand: Candidate, nbytes: int, count: int) -> Timed | None:
        """The candidate's timing at ``count`` elements, or None if it cannot be built, checked
        or simulated here (the reason is kept in ``failed``)."""
        chunks = self.chunks(cand, nbytes)
        structure = (cand.algorithm, cand.channels, chunks)
        if structure in self.failed:
            return None
        hit = self.timed.get((cand, count))
        if hit is not None:
            return hit
        try:
            compiled = self.checked_for(*structure)
            scale = count / self.reference_count(cand.channels, chunks)
            step = self.step_bytes(cand, nbytes)
            if isinstance(compiled, SteadyRing):
                result = compiled.run(
                    protocol(cand.protocol), self._ring_block_bytes(cand.channels, count),
                    count * itemsize(self.dtype),
                )  # fmt: skip
            elif isinstance(compiled, SteadyPipeline):
                result = compiled.run(
                    cand.protocol, dtype=self.dtype, step_bytes=float(step or math.inf),
                    scale=count / self.reference_count(cand.channels, 1),
                )  # fmt: skip
            elif isinstance(compiled, Pattern):  # never with stragglers (see _patterns_allowed)
                result = compiled.run(
                    cand.protocol, dtype=self.dtype, scale=scale, step_bytes=step,
                    exact=self.session.exact,
                )  # fmt: skip
            else:
                result = compiled.run(
                    cand.protocol, dtype=self.dtype, scale=scale, step_bytes=step,
                    exact=self.session.exact, stragglers=self.session.stragglers,
                )  # fmt: skip
        except (ScheduleError, SimulationError, LimitError) as error:  # unsupported, wrong or
            # too large to build here (MAX_SCHEDULE_OPS, memory): never trusted, never fatal
            self.failed[structure] = error.one_line()
            return None
        timed = self.timed[(cand, count)] = Timed(float(result.time_s), chunks, result)
        return timed

    def _ring_block_bytes(self, channels: int, count: int) -> Any:
        """Per lane of a one-chunk ring at ``count`` elements, the bytes of its largest block
        (the ring builder's split: :func:`~scaleup.collectives.algorithms.ring.row_counts`)."""
        spec = CollectiveSpec(self.collective, self.nranks, count, root=self.root,
                              redop=self.redop)  # fmt: skip
        params = ring.normalise(spec, {**self.params("ring", channels), "channels": channels,
                                       "chunks": 1})  # fmt: skip
        rows = ring.row_counts(spec, params).reshape(-1, self.nranks)
        return rows.max(axis=1) * itemsize(self.dtype)

    def chunks(self, cand: Candidate, nbytes: int) -> int:
        """The pipeline depth ``cand`` is built with at ``nbytes``
        (:func:`~scaleup.tune.rules.chunks_for`): NVLS-Tree cuts a channel's share into one
        of NCCL's chunks per head (:meth:`step_bytes`), the others into protocol steps."""
        unit: float | None = None
        if cand.algorithm == "nvls_tree":
            heads = self._nvls_tree_heads(cand.channels)
            unit = heads * self._nvls_tree_chunk(cand.channels, heads, nbytes)
        elif self._tree_ll128(cand):
            unit = self._tree_ll128_chunk(cand.channels, nbytes)
        elif cand.protocol == "simple":
            unit = self.buffers.simple_step_bytes
        return chunks_for(
            cand.algorithm, self.collective, nbytes, cand.channels, cand.protocol, unit
        )

    def step_bytes(self, cand: Candidate, nbytes: int) -> float | None:
        """The ``step_bytes`` a pipelined candidate runs with at ``nbytes``: the protocol's
        slot (:func:`~scaleup.tune.rules.step_bytes_for`; Simple's from ``NCCL_BUFFSIZE``,
        :attr:`buffers`), or for NVLS-Tree the chunk one
        head's connection moves at a time for that size
        (:func:`~scaleup.tune.size_channels.nvls_tree_chunk_bytes`), for tree LL128 across nodes
        NCCL's chunk for that size (:func:`~scaleup.tune.size_channels.tree_ll128_chunk_bytes`);
        None for the others."""
        step = step_bytes_for(cand.algorithm, self.collective, cand.protocol)
        if step is not None and cand.algorithm == "nvls_tree":
            heads = self._nvls_tree_heads(cand.channels)
            return float(self._nvls_tree_chunk(cand.channels, heads, nbytes))
        if step is not None and self._tree_ll128(cand):
            chunk = self._tree_ll128_chunk(cand.channels, nbytes)
            return step if chunk is None else float(chunk)
        if step is not None and cand.protocol == "simple":
            return float(self.buffers.simple_step_bytes)
        return step

    def _tree_ll128(self, cand: Candidate) -> bool:
        """Whether ``cand`` is a pipelined tree on LL128 (NCCL chunks it by its own rule)."""
        return (
            cand.algorithm == "tree"
            and cand.protocol == "ll128"
            and step_bytes_for("tree", self.collective, "ll128") is not None
        )

    def _tree_ll128_chunk(self, channels: int, nbytes: int) -> int | None:
        """NCCL's tree LL128 chunk for the group across nodes
        (:func:`~scaleup.tune.size_channels.tree_ll128_chunk_bytes`), the group's nodes read
        once; None on one node or under RCCL."""
        if self._tree_ll128_nodes is None:
            self._tree_ll128_nodes = (tree_ll128_shape(self.topology, self.group),)
        shape = self._tree_ll128_nodes[0]
        return None if shape is None else tree_ll128_chunk_for(nbytes, channels, *shape)

    def _nvls_tree_heads(self, channels: int) -> int:
        params = self.params("nvls_tree", channels)
        return len(params["heads"] or range(params["ranks_per_node"]))

    def _nvls_tree_chunk(self, channels: int, heads: int, nbytes: int) -> int:
        return nvls_tree_chunk_bytes(
            self.topology,
            self.group,
            nbytes,
            channels * heads,
            nvls_chunk_bytes=self.buffers.nvls_chunk_bytes,
            tree_max_chunk_bytes=self.buffers.nvls_tree_max_chunk_bytes,
        )

    def nvls_heads(self) -> ChannelPlan:
        """The group's NVLS heads (:func:`~scaleup.tune.channel_search.nvls_heads`), searched
        once: the ``nvls_tree`` builder's parameters and NCCL's NVLS graph both read them."""
        if self._heads is None:
            wiring = self.session.wiring(self.topology)
            self._heads = nvls_heads(self.topology, self.group, wiring=wiring)
        return self._heads

    def nccl_model(self) -> ModelInputs | None:
        """NCCL's cost-model inputs for this group (:func:`scaleup.tune.nccl_inputs.
        model_inputs`; RCCL's on AMD nodes), once; None where neither applies."""
        if self._nccl_model is None:
            inputs = model_inputs(self.topology, self.group, self.shape, self.nvls_heads)
            self._nccl_model = (inputs,)
        return self._nccl_model[0]

    @property
    def fabric(self) -> GroupFabric:
        """The capacities around the group (:class:`~scaleup.tune.bounds.GroupFabric`), once."""
        if self._fabric is None:
            network = self.session.network(self.topology)
            self._fabric = GroupFabric.of(self.topology, self.group, network)
        return self._fabric

    def lower_bound_s(self, cand: Candidate, count: int) -> float:
        """A lower bound of the candidate's time at ``count`` elements that builds nothing:
        :func:`scaleup.tune.bounds.lower_bound_s` from the algorithm's structure, raised to
        :meth:`CompiledSchedule.lower_bound_s` (the congestion bound, tighter where a channel
        carries more than its share) when a structure of the candidate is already compiled
        (every pipelined depth carries the same bytes)."""
        key = (cand, count)
        bound = self._bounds.get(key)
        if bound is None:
            bound = self._bounds[key] = lower_bound_s(
                self.topology, self.group, self.fabric, self.collective, cand, count,
                params=self.params(cand.algorithm, cand.channels), dtype=self.dtype,
                root=self.root, step_bytes=self.step_bytes(cand, count * itemsize(self.dtype)),
            )  # fmt: skip
        for (algorithm, channels, chunks), compiled in self.compiled.items():
            if (algorithm, channels) == (cand.algorithm, cand.channels):
                scale = count / self.reference_count(channels, chunks)
                congestion = compiled.lower_bound_s(cand.protocol, dtype=self.dtype, scale=scale)
                return max(bound, float(congestion))
        return bound


def _steady_key(structure: tuple[str, int, int]) -> tuple[str, int, int]:
    """A steady-state structure's key: a tree's is one per channel count (its steady state is
    the one-chunk table's, whatever the pipeline depth)."""
    algorithm, channels, chunks = structure
    return (algorithm, channels, 1 if algorithm == "tree" else chunks)
