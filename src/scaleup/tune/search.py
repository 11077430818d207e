"""The search: a session that owns compiled schedules and picks the fastest candidate, explained.

A :class:`TuneSession` is the state of one tuning job (a ``scaleup bench`` call, a planner run):
per topology its :class:`~scaleup.sim.Network` (routes, added as schedules are compiled), per
question (topology, collective, group of ranks, dtype, redop, root) the compiled schedules and
their timings, and the :class:`~scaleup.tune.checks.CheckedSet` of verified structures. Nothing
lives at module level: drop the session and everything goes with it.

Every enabled candidate (:func:`scaleup.tune.rules.candidates`) is *simulated*, so the choice is
never slower than another candidate the search knows. Schedules are built once per (algorithm,
channels, chunks) at a reference count, checked in lanes (:mod:`scaleup.tune.checks`), compiled
once and run under every protocol and size by scaling their counts (docs/models.md). The chosen
structure is then checked exactly; one that fails is dropped and the choice made again.

Speed. :meth:`TuneSession.sweep` tunes ascending sizes with branch and bound over two lower
bounds of a candidate's time at size S: its simulated time at a smaller size (a bigger message
never finishes sooner on the same schedule shape), and :func:`scaleup.tune.bounds.lower_bound_s`
(launch latency plus the larger of the bytes each rank, server and thread block must carry over
its capacity and the algorithm's chain of dependent steps), which builds no op table; where a
structure of the candidate is already compiled its congestion bound
(:meth:`~scaleup.sim.CompiledSchedule.lower_bound_s`) raises it. Candidates are simulated
cheapest bound first; one whose bound exceeds the best time found at this size (or equals it and
comes later in candidate order, so it would lose the tie) is never built, and one that is built
is not run when the congestion bound of its structure loses so.
:meth:`TuneSession.tune` simulates every candidate at every size.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from scaleup.collectives.algorithms import build_schedule
from scaleup.collectives.schedule import Schedule
from scaleup.collectives.spec import CollectiveSpec
from scaleup.errors import ScheduleError, SimulationError, UsageError
from scaleup.sim import CompiledSchedule, Network, SimResult, compile_schedule
from scaleup.topology.model import Topology
from scaleup.tune.bounds import GroupFabric, lower_bound_s
from scaleup.tune.channels import GroupShape
from scaleup.tune.checks import REFERENCE_BLOCKS, CheckedSet
from scaleup.tune.choice import TunedChoice
from scaleup.tune.nvls import nvls_tree_params
from scaleup.tune.observe import CandidateOutcome, Observer
from scaleup.tune.request import ROOTED, BenchRequest
from scaleup.tune.rules import Candidate, candidates, chunks_for, step_bytes_for

__all__ = ["Progress", "TuneSession", "TunedChoice", "resolve_group"]

#: ``progress(done, total)``, called after each size.
Progress = Callable[[int, int], None]


@dataclass(frozen=True)
class _Timed:
    time_s: float
    chunks: int
    result: SimResult


class _Question:
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
    ) -> None:
        self.session = session
        self.topology = topology
        self.collective, self.group, self.dtype, self.redop, self.root = key
        self.shape = session.shape(topology, self.group)
        self.nranks = self.shape.nranks
        self.compiled: dict[tuple[str, int, int], CompiledSchedule] = {}
        self.timed: dict[tuple[Candidate, int], _Timed] = {}
        self.failed: dict[tuple[str, int, int], str] = {}
        self._fabric: GroupFabric | None = None
        self._bounds: dict[tuple[Candidate, int], float] = {}
        self._params: dict[tuple[str, int], dict[str, Any]] = {}

    def reference_count(self, channels: int, chunks: int) -> int:
        return self.nranks * channels * chunks * REFERENCE_BLOCKS

    def params(self, algorithm: str, channels: int) -> dict[str, Any]:
        """The builder parameters of (``algorithm``, ``channels``) on this group, once."""
        key = (algorithm, 0 if algorithm == "nvls_tree" else channels)
        params = self._params.get(key)
        if params is None:
            if algorithm == "nvls_tree":  # server size and one head per NIC
                params = nvls_tree_params(self.topology, self.group)
            else:
                params = self.shape.params(algorithm, channels)
            self._params[key] = params
        return params

    def build(self, algorithm: str, count: int, channels: int, chunks: int) -> Schedule:
        spec = CollectiveSpec(self.collective, self.nranks, count, root=self.root, redop=self.redop)
        params = self.params(algorithm, channels)
        return build_schedule(algorithm, spec, channels=channels, chunks=chunks, **params)

    def compiled_for(self, algorithm: str, channels: int, chunks: int) -> CompiledSchedule | None:
        """The reference structure, compiled once, unchecked (only explanations of pruned
        candidates ask: the search itself never builds a structure to bound it); None when it
        cannot be built or compiled."""
        key = (algorithm, channels, chunks)
        if key not in self.compiled:
            try:
                count = self.reference_count(channels, chunks)
                self.compiled[key] = self._compile(self.build(algorithm, count, channels, chunks))
            except (ScheduleError, SimulationError):
                return None
        return self.compiled[key]

    def _compile(self, schedule: Schedule) -> CompiledSchedule:
        network = self.session.network(self.topology)
        return compile_schedule(schedule, self.topology, ranks=self.group, network=network)

    def checked_for(self, algorithm: str, channels: int, chunks: int) -> CompiledSchedule:
        """The reference structure, checked in lanes before it is first compiled."""
        key = (algorithm, channels, chunks)
        compiled = self.compiled.get(key)
        schedule = (
            compiled.schedule
            if compiled is not None
            else self.build(algorithm, self.reference_count(channels, chunks), channels, chunks)
        )
        self.session.checked.check_lanes(schedule)
        if compiled is None:
            compiled = self.compiled[key] = self._compile(schedule)
        return compiled

    def confirm(self, cand: Candidate, chunks: int) -> str | None:
        """The exact check of a chosen structure: its verdict, or None (and the structure marked
        failed) when it is wrong."""
        structure = (cand.algorithm, cand.channels, chunks)
        try:
            return self.session.checked.check_exact(self.compiled[structure].schedule)
        except ScheduleError as error:
            self.failed[structure] = error.one_line()
            return None

    def prepare(self, cand: Candidate, nbytes: int) -> bool:
        """Build, check and compile the structure ``cand`` runs at ``nbytes`` (what
        :meth:`simulate` does first), so that its congestion bound is known before it is run;
        False when it cannot be (the reason is kept in ``failed``)."""
        chunks = chunks_for(cand.algorithm, self.collective, nbytes, cand.channels, cand.protocol)
        structure = (cand.algorithm, cand.channels, chunks)
        if structure in self.failed:
            return False
        try:
            self.checked_for(*structure)
        except (ScheduleError, SimulationError) as error:  # unsupported or wrong: never trusted
            self.failed[structure] = error.one_line()
            return False
        return True

    def simulate(self, cand: Candidate, nbytes: int, count: int) -> _Timed | None:
        """The candidate's timing at ``count`` elements, or None if it cannot be built, checked
        or simulated here (the reason is kept in ``failed``)."""
        chunks = chunks_for(cand.algorithm, self.collective, nbytes, cand.channels, cand.protocol)
        structure = (cand.algorithm, cand.channels, chunks)
        if structure in self.failed:
            return None
        hit = self.timed.get((cand, count))
        if hit is not None:
            return hit
        try:
            compiled = self.checked_for(*structure)
            scale = count / self.reference_count(cand.channels, chunks)
            step = step_bytes_for(cand.algorithm, self.collective, cand.protocol)
            result = compiled.run(
                cand.protocol, dtype=self.dtype, scale=scale, step_bytes=step,
                exact=self.session.exact,
            )  # fmt: skip
        except (ScheduleError, SimulationError) as error:  # unsupported or wrong: never trusted
            self.failed[structure] = error.one_line()
            return None
        timed = self.timed[(cand, count)] = _Timed(float(result.time_s), chunks, result)
        return timed

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
                root=self.root,
            )  # fmt: skip
        for (algorithm, channels, chunks), compiled in self.compiled.items():
            if (algorithm, channels) == (cand.algorithm, cand.channels):
                scale = count / self.reference_count(channels, chunks)
                congestion = compiled.lower_bound_s(cand.protocol, dtype=self.dtype, scale=scale)
                return max(bound, float(congestion))
        return bound


class TuneSession:
    """Networks, compiled schedules, timings and checked structures of one tuning job.

    Examples
    --------
    >>> from scaleup.topology import resolve_topology
    >>> session = TuneSession()
    >>> request = BenchRequest(sizes_bytes=(1 << 30,))
    >>> session.sweep(resolve_topology("dgx-h100"), request)[0].algorithm
    'nvls'
    """

    def __init__(self, *, exact: bool = False) -> None:
        #: simulate every flow, never flow classes (:mod:`scaleup.sim.symmetry`): the reference
        self.exact = exact
        self.checked = CheckedSet()
        #: called with every candidate's :class:`~scaleup.tune.observe.CandidateOutcome` (explain)
        self.observer: Observer | None = None
        self._networks: dict[Topology, Network] = {}
        self._questions: dict[tuple[object, ...], _Question] = {}
        self._shapes: dict[tuple[Topology, tuple[int, ...] | None], GroupShape] = {}

    def network(self, topology: Topology) -> Network:
        """The :class:`~scaleup.sim.Network` every schedule on ``topology`` is compiled into."""
        net = self._networks.get(topology)
        if net is None:
            net = self._networks[topology] = Network(topology)
        return net

    def shape(self, topology: Topology, group: tuple[int, ...] | None) -> GroupShape:
        """The channel plans of ``group`` (accelerator indices; None: all) on ``topology``,
        searched once per session (:class:`~scaleup.tune.channels.GroupShape`)."""
        key = (topology, group)
        shape = self._shapes.get(key)
        if shape is None:
            shape = self._shapes[key] = GroupShape.of(topology, group)
        return shape

    def tune(
        self, topology: Topology, request: BenchRequest, *, group: Sequence[int] | None = None
    ) -> list[TunedChoice]:
        """Every candidate simulated at every size of ``request``; the least time wins (ties:
        first in candidate order). ``group``: the ranks (indices into the accelerators, in rank
        order) instead of the first ``request.ranks``."""
        search = self._search(topology, request, group, prune=False)
        return [search.choose(nbytes, count) for nbytes, _, count in search.printed]

    def sweep(
        self,
        topology: Topology,
        request: BenchRequest,
        *,
        group: Sequence[int] | None = None,
        progress: Progress | None = None,
    ) -> list[TunedChoice]:
        """:meth:`tune` over the sizes of ``request``, faster (branch and bound, see module);
        the choices in the order of the sizes."""
        search = self._search(topology, request, group, prune=True)
        printed = search.printed
        order = sorted(range(len(printed)), key=lambda i: printed[i][0])
        out: dict[int, TunedChoice] = {}
        for done, i in enumerate(order, start=1):
            out[i] = search.choose(printed[i][0], printed[i][2])
            if progress is not None:
                progress(done, len(order))
        return [out[i] for i in range(len(printed))]

    def _search(
        self, topology: Topology, request: BenchRequest, group: Sequence[int] | None, prune: bool
    ) -> _Search:
        ranks = resolve_group(topology, request, group)
        key = (request.op, ranks, request.dtype, request.spec_redop, request.spec_root)
        question = self._questions.get((topology, *key))
        if question is None:
            question = self._questions[(topology, *key)] = _Question(self, topology, key)
        cands = candidates(  # narrowed as NCCL's environment asks (BenchRequest.narrow)
            topology,
            request.op,
            ranks=ranks,
            dtype=request.dtype,
            redop=request.spec_redop,
            algo=request.algorithm,
            proto=request.protocol,
            channels=request.channels,
            family=request.family,
            counts=request.clamp_counts(question.shape.counts),
        )
        cands = request.narrow(cands)
        return _Search(question, cands, request.printed(question.nranks), {} if prune else None)


def resolve_group(
    topology: Topology, request: BenchRequest, group: Sequence[int] | None = None
) -> tuple[int, ...] | None:
    """The ranks of a question as accelerator indices (``group``, else the first
    ``request.ranks``), checked against the topology; None for all of them, in order."""
    n_all = len(topology.accelerators)
    if group is None:
        n = request.nranks_on(topology)
        return None if n == n_all else tuple(range(n))
    ranks = tuple(int(r) for r in group)
    if not ranks:
        raise UsageError("a collective needs at least one rank", source="ranks")
    if len(set(ranks)) != len(ranks) or not all(0 <= r < n_all for r in ranks):
        raise UsageError(
            f"ranks must be distinct accelerator indices in 0..{n_all - 1}, got {list(ranks)}",
            source="ranks",
        )
    if request.op in ROOTED and request.root >= len(ranks):
        raise UsageError(f"root must be in 0..{len(ranks) - 1}, got {request.root}", source="root")
    return None if ranks == tuple(range(n_all)) else ranks


#: Times within this relative difference are a tie (broken by candidate order): the flow-class
#: path and the per-flow path (``--exact``) add the same rates in another order, and a tie in one
#: must stay a tie in the other.
TIE_RTOL = 1e-9


def _beats(time_s: float, order: int, best: tuple[float, int]) -> bool:
    """Whether (``time_s``, ``order``) wins over ``best``: faster beyond a tie, or a tie and
    earlier in candidate order."""
    if time_s < best[0] * (1 - TIE_RTOL):
        return True
    return time_s <= best[0] * (1 + TIE_RTOL) and order < best[1]


class _Search:
    """One pass over the sizes of a request: the candidates and, when pruning, each candidate's
    time at the last size it was simulated at (a lower bound at every larger size) and the
    previous size's choice (simulated first)."""

    def __init__(
        self,
        question: _Question,
        cands: list[Candidate],
        printed: list[tuple[int, int, int]],
        bounds: dict[Candidate, float] | None,
    ) -> None:
        self.question = question
        self.cands = cands
        self.order = {c: i for i, c in enumerate(cands)}
        self.printed = printed
        self.bounds = bounds
        self.first: Candidate | None = None

    def choose(self, nbytes: int, count: int) -> TunedChoice:
        """The fastest candidate whose structure passes the exact check (see module)."""
        while True:
            cand, timed, considered = self._fastest(nbytes, count)
            verdict = self.question.confirm(cand, timed.chunks)
            if verdict is not None:
                self.first = cand
                return TunedChoice(
                    cand.algorithm,
                    cand.protocol,
                    cand.channels,
                    timed.chunks,
                    timed.time_s,
                    timed.result,
                    verdict,
                    considered,
                )

    def _queue(self, count: int) -> list[Candidate]:
        """Candidates in the order they are simulated: cheapest bound first when pruning (so the
        best is found early and prunes the rest), the previous size's choice before all."""
        bounds, order = self.bounds, self.order
        if bounds is not None:
            queue = sorted(
                self.cands,
                key=lambda c: (
                    max(bounds.get(c, 0.0), self.question.lower_bound_s(c, count)),
                    order[c],
                ),
            )
        else:
            queue = list(self.cands)
        if self.first is not None and self.first in order:
            queue.remove(self.first)
            queue.insert(0, self.first)
        return queue

    def _pruned(self, cand: Candidate, count: int, best: tuple[float, int]) -> bool:
        """Whether ``cand`` cannot beat ``best`` (time, candidate order): a lower bound above the
        best time, or equal to it when ``cand`` comes later in candidate order (a tie it would
        lose); its time at a smaller size, or :meth:`_Question.lower_bound_s`."""
        if self.bounds is None:
            return False
        loses = self.order[cand] > best[1]
        for bound in (self.bounds.get(cand, 0.0), self.question.lower_bound_s(cand, count)):
            if bound > best[0] * (1 + TIE_RTOL) or (loses and bound >= best[0] * (1 - TIE_RTOL)):
                return True
        return False

    def _fastest(
        self, nbytes: int, count: int
    ) -> tuple[Candidate, _Timed, tuple[tuple[Candidate, float], ...]]:
        """The least simulated time over the candidates (ties: first in candidate order) and
        every (candidate, time) simulated."""
        best: tuple[float, int, Candidate, _Timed] | None = None
        considered = []
        for cand in self._queue(count):
            if (
                best is not None
                and (
                    self._pruned(cand, count, best[:2])  # its bounds lose: never built
                    or (  # built (as it would be to run it): its congestion bound may lose
                        (cand, count) not in self.question.timed
                        and self.question.prepare(cand, nbytes)
                        and self._pruned(cand, count, best[:2])
                    )
                )
            ):
                self._observe(nbytes, count, cand, None, pruned=True)
                continue
            timed = self.question.simulate(cand, nbytes, count)
            self._observe(nbytes, count, cand, timed)
            if timed is None:
                continue
            considered.append((cand, timed.time_s))
            if self.bounds is not None:
                self.bounds[cand] = timed.time_s
            if best is None or _beats(timed.time_s, self.order[cand], best[:2]):
                best = (timed.time_s, self.order[cand], cand, timed)
        if best is None:
            q = self.question
            reasons = "; ".join(sorted(set(q.failed.values()))) or "no candidate"
            raise SimulationError(
                f"no algorithm can run {q.collective} on {q.nranks} ranks here ({reasons})",
                source=q.topology.name,
            )
        return best[2], best[3], tuple(considered)

    def _observe(
        self, nbytes: int, count: int, cand: Candidate, timed: _Timed | None, pruned: bool = False
    ) -> None:
        """Tell the session's observer what became of ``cand`` (nothing when there is none)."""
        q = self.question
        if q.session.observer is None:
            return
        chunks = chunks_for(cand.algorithm, q.collective, nbytes, cand.channels, cand.protocol)
        key, first = (cand.algorithm, cand.channels, chunks), (cand.algorithm, cand.channels, 1)
        compiled = q.compiled.get(key) or q.compiled.get(first)
        if pruned and compiled is None:  # explaining: the structure whose bound is shown
            compiled = q.compiled_for(*first)
        q.session.observer(CandidateOutcome(
            q.topology, q.group, q.collective, nbytes, count, cand, chunks,
            "pruned" if pruned else "failed" if timed is None else "simulated",
            time_s=None if timed is None else timed.time_s, result=timed.result if timed else None,
            bound_s=max((self.bounds or {}).get(cand, 0.0), q.lower_bound_s(cand, count))
            if pruned else None, compiled=compiled, reason=q.failed.get(key, ""),
        ))  # fmt: skip
