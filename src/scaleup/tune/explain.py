"""Why the tuner chose what it chose: every candidate, its time, what bounds it, its channels.

:func:`explain_sweep` runs :meth:`~scaleup.tune.search.TuneSession.sweep` with an observer
(:mod:`scaleup.tune.observe`) and returns one :class:`Explanation` per size: every candidate
(algorithm, protocol, channels) the search considered, as a :class:`CandidateTiming`:

- ``simulated`` with its time, or ``pruned`` with the lower bound that reached the best time
  found (so it could not win), or ``failed`` with the reason it cannot run here;
- what bounds it (:class:`Bound`): the constraint that must stay busy longest, ``bytes /
  capacity`` over the whole run (the congestion bound of :meth:`~scaleup.sim.CompiledSchedule.
  lower_bound_s`; a link or NIC named as the topology names its channel ``src->dst``, an HBM, a
  thread block), its utilisation over the simulated time, and the bound's kind: the
  constraint's, ``in-switch reduction`` when it is a link carrying NVLS switch reductions, or
  ``latency`` when the time the busiest constraint needs is less than half the time (the fixed
  launch and per-step latencies dominate);
- the channels it used (:mod:`scaleup.tune.explain_paths`): per channel tag, the ring or the
  paths as communicator-rank orders.

Per size, :attr:`Explanation.lp_bound` sets the choice against the collective's own lower bound
on the fabric (:mod:`scaleup.tune.lp_bound`, an LP solved once per fabric and group): what no
schedule of any algorithm can beat, its busbw and the chosen time over it.

By hand: a bandwidth-bound candidate's time is about ``bound.busy_s`` (= ``load_bytes /
capacity``) plus its latencies; for a ring all_reduce of S bytes on n ranks behind a switch,
``load_bytes`` is the link's share of ``2 (n-1)/n x S``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from scaleup.arrays import unique
from scaleup.collectives.schedule import OpKind
from scaleup.collectives.spec import itemsize
from scaleup.sim import CompiledSchedule
from scaleup.topology.model import NodeKind, Topology
from scaleup.tune.explain_paths import ChannelPath, channel_paths
from scaleup.tune.lp_bound import LpBound, lp_lower_bound
from scaleup.tune.observe import CandidateOutcome
from scaleup.tune.request import BenchRequest
from scaleup.tune.rules import Candidate
from scaleup.tune.search import Progress, TunedChoice, TuneSession

__all__ = [
    "LATENCY_SHARE",
    "Bound",
    "CandidateTiming",
    "ChannelPath",
    "ExplainRecorder",
    "Explanation",
    "LpBound",
    "explain_sweep",
]

#: A candidate is ``latency``-bound when its busiest constraint needs less than this share of its
#: time (the rest is launch and per-step latency).
LATENCY_SHARE = 0.5
#: Network constraint kinds (:attr:`scaleup.sim.Network.constraint_kind`) as explained.
_KIND = {0: "link", 1: "host link", 2: "hbm", 3: "host memory"}


@dataclass(frozen=True)
class Bound:
    """What bounds a candidate. ``constraint`` is the busiest constraint's name (always given,
    also when ``kind`` is ``latency``), ``constraint_kind`` its kind (``link``, ``nic``, ``hbm``,
    ``thread block``, ``host link``, ``host memory``); ``load_bytes`` the capacity its ops
    consume (payload bytes, times the protocol's and NVLS's overheads), ``payload_bytes`` the
    bytes it carries, ``busy_s = load_bytes / capacity_bytes_per_s``, ``utilisation = busy_s /
    time`` (None when not simulated)."""

    kind: str
    constraint: str
    constraint_kind: str
    load_bytes: float
    payload_bytes: float
    capacity_bytes_per_s: float
    busy_s: float
    utilisation: float | None


@dataclass(frozen=True)
class CandidateTiming:
    """One candidate at one size (see the module). ``time_s``: simulated time; ``bound_s``: the
    lower bound that pruned it; ``channel_paths``: the channels of its structure."""

    algorithm: str
    protocol: str
    channels: int
    chunks: int
    status: str
    chosen: bool
    time_s: float | None
    bound_s: float | None
    bound: Bound | None
    channel_paths: tuple[ChannelPath, ...]
    reason: str = ""
    #: the bytes each pipeline step moves (None: one chunk, not pipelined)
    step_bytes: float | None = None

    @property
    def candidate(self) -> Candidate:
        return Candidate(self.algorithm, self.protocol, self.channels)

    @property
    def sort_s(self) -> float:
        """Its time, else its bound (pruned), else infinity (failed): the listing order."""
        value = self.time_s if self.time_s is not None else self.bound_s
        return float("inf") if value is None else value

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class Explanation:
    """The tuner's choice at one size and every candidate it considered, least time first."""

    topology: str
    collective: str
    nranks: int
    nbytes: int
    count: int
    dtype: str
    algorithm: str
    protocol: str
    channels: int
    chunks: int
    time_s: float
    verification: str
    candidates: tuple[CandidateTiming, ...]
    lp_bound: LpBound | None = None
    #: how the choice was made (``fastest`` or ``nccl-model``) and, for ``nccl-model``, NCCL's
    #: predicted time (s) of every (algorithm, protocol) its model fills
    selection: str = "fastest"
    predicted: tuple[tuple[str, str, float], ...] = ()
    #: whose model predicted them (``NCCL`` or ``RCCL``)
    model: str = "NCCL"
    #: the tuner plugin that chose over the model ("": none; :mod:`scaleup.tune.ofi_tuner`)
    plugin: str = ""

    @property
    def chosen(self) -> CandidateTiming:
        return next(c for c in self.candidates if c.chosen)

    def to_dict(self) -> dict[str, Any]:
        """The fields as JSON values; ``model`` only where it is not NCCL's (NVIDIA output kept
        as it was before RCCL's model), ``plugin`` only where one chose."""
        out = asdict(self)
        if self.model == "NCCL":
            del out["model"]
        if not self.plugin:
            del out["plugin"]
        return out


class ExplainRecorder:
    """The observer: keeps the last outcome of every (topology, size, candidate)."""

    def __init__(self) -> None:
        self.outcomes: dict[tuple[Topology, int, Candidate], CandidateOutcome] = {}

    def __call__(self, outcome: CandidateOutcome) -> None:
        self.outcomes[(outcome.topology, outcome.nbytes, outcome.candidate)] = outcome

    def of(self, topology: Topology, nbytes: int) -> list[CandidateOutcome]:
        """The outcomes at one size on one topology, in the order they were decided."""
        return [o for (t, b, _), o in self.outcomes.items() if t == topology and b == nbytes]


def explain_sweep(
    topology: Topology,
    request: BenchRequest,
    *,
    session: TuneSession | None = None,
    group: Sequence[int] | None = None,
    progress: Progress | None = None,
) -> tuple[list[TunedChoice], list[Explanation]]:
    """``session.sweep(topology, request)`` and, per size, its :class:`Explanation`."""
    session = session or TuneSession()
    recorder = ExplainRecorder()
    previous, session.observer = session.observer, recorder
    try:
        choices = session.sweep(topology, request, group=group, progress=progress)
    finally:
        session.observer = previous
    n = request.nranks_on(topology) if group is None else len(group)
    model = lp_lower_bound(
        topology, request.op, ranks=range(n) if group is None else group, root=request.root
    )
    explained = [
        dataclasses.replace(
            explain_choice(choice, recorder.of(topology, nbytes), request.dtype, nbytes, count, n),
            lp_bound=model.at(nbytes, choice.time_s),
        )
        for (nbytes, _, count), choice in zip(request.printed(n), choices, strict=True)
    ]
    return choices, explained


def explain_choice(
    choice: TunedChoice,
    outcomes: Sequence[CandidateOutcome],
    dtype: str,
    nbytes: int,
    count: int,
    nranks: int,
) -> Explanation:
    """One size's :class:`Explanation` from the search's outcomes there."""
    timings = [_timing(o, o.candidate == choice.candidate, dtype) for o in outcomes]
    timings.sort(key=lambda c: (not c.chosen, c.sort_s, c.candidate))
    topology = outcomes[0].topology.name if outcomes else choice.result.topology
    return Explanation(
        topology, outcomes[0].collective if outcomes else "", nranks, nbytes, count, dtype,
        choice.algorithm, choice.protocol, choice.channels, choice.chunks, choice.time_s,
        choice.verification, tuple(timings), None, choice.selection, choice.predicted,
        choice.model, choice.plugin,
    )  # fmt: skip


def _timing(o: CandidateOutcome, chosen: bool, dtype: str) -> CandidateTiming:
    c = o.candidate
    bound = paths = None
    if o.compiled is not None:
        bound = bound_of(o.compiled, c.protocol, dtype, o.count, o.time_s)
        paths = channel_paths(o.compiled.schedule)
    return CandidateTiming(
        c.algorithm, c.protocol, c.channels, o.chunks, o.status, chosen, o.time_s, o.bound_s,
        bound, paths or (), o.reason, o.step_bytes,
    )  # fmt: skip


def _constraint_kind(compiled: CompiledSchedule, index: int) -> str:
    net = compiled.net
    if index >= net.n_constraints:
        return "thread block"
    if index < net.n_channels:
        channel = compiled.topology.channels[index]
        kinds = {d.id: d.kind for d in compiled.topology.devices}
        ends = (kinds.get(channel.src), kinds.get(channel.dst))
        return "nic" if NodeKind.NIC in ends else "link"
    return _KIND.get(int(net.constraint_kind[index]), "other")


def bound_of(
    compiled: CompiledSchedule, protocol: str, dtype: str, count: int, time_s: float | None
) -> Bound:
    """What bounds ``compiled`` run at ``count`` elements (see the module): the constraint of
    greatest ``load / capacity``, classified; ``time_s`` is its simulated time, if any."""
    from scaleup.sim.protocols import protocol as protocol_of

    proto = protocol_of(protocol)
    (col_ptr, row, use, carried), capacity, _lat, _memo = compiled.system(proto)
    spec_count = compiled.schedule.spec.count
    per_count = itemsize(dtype) * (count / spec_count if spec_count else 0.0)
    var_bytes = np.bincount(compiled.var_of_op, weights=compiled.count, minlength=compiled.n_vars)
    var_bytes = np.repeat(var_bytes * per_count, np.diff(col_ptr))
    load = np.bincount(row, weights=use * var_bytes, minlength=len(capacity))
    payload = np.bincount(row, weights=carried * var_bytes, minlength=len(capacity))
    busy = load / capacity
    i = int(np.argmax(busy)) if len(busy) else 0
    net = compiled.net
    names = net.constraint_names + compiled.cta_names(proto)
    ckind = _constraint_kind(compiled, i) if len(busy) else "none"
    if ckind == "thread block":
        payload[i] = load[i]  # a thread block's capacity is payload bytes per second
    busy_s = float(busy[i]) if len(busy) else 0.0
    kind = ckind
    if time_s is not None and busy_s < LATENCY_SHARE * time_s:
        kind = "latency"
    elif ckind in ("link", "nic") and _carries_switch_reduce(compiled, i):
        kind = "in-switch reduction"
    return Bound(
        kind, names[i] if len(busy) else "", ckind, float(load[i]) if len(busy) else 0.0,
        float(payload[i]) if len(busy) else 0.0, float(capacity[i]) if len(busy) else 0.0,
        busy_s, busy_s / time_s if time_s else None,
    )  # fmt: skip


def _carries_switch_reduce(compiled: CompiledSchedule, constraint: int) -> bool:
    """Whether any switch_reduce op of ``compiled`` puts bytes on network constraint
    ``constraint``."""
    table = compiled.schedule.table
    ops = np.flatnonzero(table.kind == int(OpKind.SWITCH_REDUCE))
    routes = compiled.net.routes
    return any(constraint in routes[int(r)].net_rows for r in unique(compiled.route[ops]))
