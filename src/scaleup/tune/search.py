"""The search: a session that owns compiled schedules and picks a candidate, explained.

A :class:`TuneSession` is the state of one tuning job (a ``scaleup bench`` call, a planner run):
per topology its :class:`~scaleup.sim.Network` (routes, added as schedules are compiled), per
question (topology, collective, group of ranks, dtype, redop, root) the compiled schedules and
their timings, and the :class:`~scaleup.tune.checks.CheckedSet` of verified structures. Nothing
lives at module level: drop the session and everything goes with it.

Which candidate is chosen is the request's ``selection``: ``nccl-model`` (the default) takes the
(algorithm, protocol) NCCL's own cost model picks (:mod:`scaleup.tune.nccl_model`; RCCL's on
AMD nodes, :mod:`scaleup.tune.rccl_inputs`) on the library's channel count and simulates that
one (:meth:`scaleup.tune.choose.SizePass.choose`), as the library does; ``fastest``, described
below, and wherever the library's model does not apply. With ``fastest``
every enabled candidate (:func:`scaleup.tune.rules.candidates`) is *simulated*, so the choice is
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

The per-question state lives in :mod:`~scaleup.tune.question`, the pass over sizes and the tie
rule in :mod:`~scaleup.tune.choose`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence

from scaleup.errors import UsageError
from scaleup.sim import Network
from scaleup.sim.straggler import Stragglers
from scaleup.topology.model import Topology
from scaleup.tune.channel_search import Wiring
from scaleup.tune.channels import GroupShape
from scaleup.tune.checks import CheckedSet
from scaleup.tune.choice import TunedChoice
from scaleup.tune.choose import SizePass
from scaleup.tune.msccl import msccl_rule
from scaleup.tune.observe import Observer
from scaleup.tune.ofi_env import plugin_buffers
from scaleup.tune.ofi_tuner import OfiRegionTuner
from scaleup.tune.p2p_rule import P2P_COLLECTIVES, P2pRule
from scaleup.tune.question import Question
from scaleup.tune.request import ROOTED, BenchRequest
from scaleup.tune.rules import candidates
from scaleup.tune.size_channels import ChannelTrim

__all__ = ["Progress", "TuneSession", "TunedChoice", "resolve_group"]

#: ``progress(done, total)``, called after each size.
Progress = Callable[[int, int], None]


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

    def __init__(self, *, exact: bool = False, stragglers: Stragglers | None = None) -> None:
        #: simulate every flow, never flow classes (:mod:`scaleup.sim.symmetry`): the reference
        self.exact = exact
        #: slow and late ranks of every collective timed (:mod:`scaleup.sim.straggler`); they
        #: break the rank-shift symmetry, so their runs are exact and rings never use the pattern
        self.stragglers = None if stragglers is None or stragglers.is_identity else stragglers
        self.checked = CheckedSet()
        #: called with every candidate's :class:`~scaleup.tune.observe.CandidateOutcome` (explain)
        self.observer: Observer | None = None
        self._networks: dict[Topology, Network] = {}
        self._questions: dict[tuple[object, ...], Question] = {}
        self._shapes: dict[tuple[Topology, tuple[int, ...] | None], GroupShape] = {}
        self._wirings: dict[Topology, Wiring] = {}

    def network(self, topology: Topology) -> Network:
        """The :class:`~scaleup.sim.Network` every schedule on ``topology`` is compiled into."""
        net = self._networks.get(topology)
        if net is None:
            net = self._networks[topology] = Network(topology)
        return net

    def wiring(self, topology: Topology) -> Wiring:
        """The channels by device and server wiring every channel search on ``topology`` reads
        (:class:`~scaleup.tune.channel_search.Wiring`), built once per session."""
        wiring = self._wirings.get(topology)
        if wiring is None:
            wiring = self._wirings[topology] = Wiring(topology)
        return wiring

    def shape(self, topology: Topology, group: tuple[int, ...] | None) -> GroupShape:
        """The channel plans of ``group`` (accelerator indices; None: all) on ``topology``,
        searched once per session (:class:`~scaleup.tune.channels.GroupShape`)."""
        key = (topology, group)
        shape = self._shapes.get(key)
        if shape is None:
            shape = self._shapes[key] = GroupShape.of(topology, group, wiring=self.wiring(topology))
        return shape

    def tune(
        self, topology: Topology, request: BenchRequest, *, group: Sequence[int] | None = None
    ) -> list[TunedChoice]:
        """Every size of ``request`` tuned without pruning: with ``selection="fastest"`` every
        candidate is simulated and the least time wins (ties: first in candidate order); with
        ``nccl-model`` NCCL's pick is simulated (module docstring). ``group``: the ranks (indices
        into the accelerators, in rank order) instead of the first ``request.ranks``."""
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
    ) -> SizePass:
        ranks = resolve_group(topology, request, group)
        key = (request.op, ranks, request.dtype, request.spec_redop, request.spec_root)
        buffers = request.buffers.over(plugin_buffers(topology, ranks))
        question = self._questions.get((topology, *key, buffers))
        if question is None:
            question = Question(self, topology, key, buffers=buffers)
            self._questions[(topology, *key, buffers)] = question
        if self.stragglers is not None:
            self.stragglers.check(question.nranks)
        cands = candidates(  # narrowed as NCCL's environment asks (BenchRequest.narrow)
            topology,
            request.op,
            ranks=ranks,
            dtype=request.dtype,
            redop=request.nccl_redop,  # avg: no NVLS (ncclNvlsSupported takes no PreMulSum)
            algo=request.algorithm,
            proto=request.protocol,
            channels=request.channels,
            family=request.family,
            counts=request.clamp_counts(question.shape.counts),
            ll128_c2c=request.ll128_c2c,
        )
        cands = request.narrow(cands)
        msccl = () if request.pinned else msccl_rule(topology, request.op, ranks)
        trim = None if request.channels is not None else ChannelTrim.of(topology, ranks)
        if trim is not None:  # nvlsChannels within [minCTAs, maxCTAs] (nvls.cc line 235)
            nvls = request.clamp_counts((trim.nvls_channels,))[0]
            trim = dataclasses.replace(trim, nvls_channels=nvls)
        p2p = P2pRule.of(topology, ranks, buffers) if _p2p_ruled(request) else None
        model = plugin = None
        if request.selection == "nccl-model" and request.family == "nccl":
            model = question.nccl_model()
            if model is not None and model.rccl is None and request.net_tuner:
                plugin = OfiRegionTuner.of(topology, ranks)
        return SizePass(
            question,
            cands,
            request.printed(question.nranks),
            {} if prune else None,
            msccl,
            trim,
            p2p=p2p,
            model=model,
            plugin=plugin,
        )


def _p2p_ruled(request: BenchRequest) -> bool:
    """Whether NCCL's p2p rule picks the channels and protocol (:mod:`scaleup.tune.p2p_rule`):
    a send/recv collective whose protocol and channels the user left to the library."""
    narrowed = (request.protocol, request.channels, request.protocols)
    limits = (request.min_channels, request.max_channels)
    return request.op in P2P_COLLECTIVES and all(v is None for v in (*narrowed, *limits))


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
