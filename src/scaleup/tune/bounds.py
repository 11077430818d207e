"""Proven lower bounds of a candidate's simulated time, without building its schedule.

The search (:mod:`scaleup.tune.search`) orders and prunes candidates by a time the simulator can
never beat. :func:`lower_bound_s` gives one for a candidate (algorithm, protocol, channels) of a
collective on a group of ranks at ``count`` elements from the algorithm's structure alone (its
ring orders and tree parents: the builder parameters the session passes, from its
:class:`~scaleup.tune.channels.GroupShape`), so no op table is built. It is the collective's
start (host launch plus the library's base latency, exactly as
:meth:`~scaleup.sim.CompiledSchedule.start_s`) plus the larger of

- **bandwidth**: for a set of channels ``C`` (the channels out of or into one rank, out of or into
  one server, a rank's links to its NVLS switches) every op puts ``bytes x use`` on them, and
  each carries at most its capacity per second, so the run lasts at least
  ``sum(bytes x use on C) / sum(capacity of C)``. A transfer's route is a flow (its fractions on
  any cut between its ends sum to at least 1), a channel's ``use`` is ``1 / payload efficiency``
  (``x 1/NVLS efficiency`` for switch reductions), so it suffices to know the bytes that cross
  ``C``. Likewise each op's bytes count once against its issuing rank's thread block on its channel
  tag, capped at ``cta_bytes_per_s``: at least ``total fabric bytes / (ranks x tags x cap)``;
- plus, on the bandwidth term, the first op's step latency: no op moves a byte before it;
- **latency**: a chain of ``k`` dependent fabric ops; each pays at least the smallest step latency
  of the protocol (its link class's, plus the route's, which is >= 0) after its predecessor
  released it, which is never before the predecessor started moving bytes (cut-through included).
  For algorithms run without ``step_bytes`` (ring) every op of the chain also moves its bytes
  before releasing the next, at most at one thread block's rate: ``k (alpha + block / cap)``;
  pipelined ones (tree, with ``step_bytes`` q) hold each successor until ``min(q, chunk)`` bytes
  have moved at that rate: ``k (alpha + min(q, chunk) / cap)``.

The bytes come from the algorithm's structure (docs/models.md, "Lower bounds"); where the
structure is not modelled here, the collective's algorithm-independent minimum stands (every
element of a rank's all_reduce input leaves the rank, every rank of a broadcast receives the
message, ...). Every term is divided by a factor slightly above 1 so that float rounding of an
exact bound (one saturated link) stays below the simulated time.

The capacities live in :mod:`~scaleup.tune.group_fabric` (:class:`GroupFabric`, re-exported
here), each algorithm's terms in :mod:`~scaleup.tune.bound_terms`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from scaleup.collectives.spec import itemsize
from scaleup.sim import params as P
from scaleup.sim.protocols import for_topology, host_launch_s, protocol
from scaleup.topology.model import Topology
from scaleup.tune.bound_terms import Terms, terms
from scaleup.tune.group_fabric import GroupFabric
from scaleup.tune.rules import Candidate, chunks_for, step_bytes_for

__all__ = ["GroupFabric", "lower_bound_s"]

#: Float safety margin: every bound is divided by this (rounding in the simulator's sums).
_MARGIN = 1.0 + 1e-9
#: Below this many bytes per op the cut-through term is left out: uneven splits of a tiny
#: message may leave some ops nearly empty, and the term is negligible there anyway.
_MIN_CUT_THROUGH_BYTES = 4096.0
#: The p2p link classes of :data:`scaleup.sim.network.LINK_CLASSES` (local ops pay none).
_P2P_CLASSES = ("nvlink", "pci", "net")


def _cut_s(load: np.ndarray, capacity: np.ndarray) -> float:
    """max over cuts of bytes / capacity (0 where nothing must cross)."""
    load = np.asarray(load, dtype=np.float64)
    need = load > 0
    if not need.any():
        return 0.0
    if np.any(capacity[need] <= 0):
        return 0.0  # no capacity: the simulator raises; no bound claimed
    return float((load[need] / capacity[need]).max())


def _cuts_s(t: Terms, fabric: GroupFabric) -> float:
    """The bandwidth term at payload efficiency 1: the slowest of the rank, server and NVLS
    switch-link cuts (server cuts only across servers)."""
    n = fabric.nranks
    n_out = np.broadcast_to(np.asarray(t.node_out, dtype=np.float64), fabric.node_out.shape)
    n_in = np.broadcast_to(np.asarray(t.node_in, dtype=np.float64), fabric.node_in.shape)
    r_out = np.broadcast_to(np.asarray(t.rank_out, dtype=np.float64), fabric.egress.shape)
    r_in = np.broadcast_to(np.asarray(t.rank_in, dtype=np.float64), fabric.ingress.shape)
    return max(
        _cut_s(r_out, fabric.egress), _cut_s(r_in, fabric.ingress),
        _cut_s(n_out, fabric.node_out) if fabric.n_nodes > 1 else 0.0,
        _cut_s(n_in, fabric.node_in) if fabric.n_nodes > 1 else 0.0,
        _cut_s(np.full(n, t.nvls_out), fabric.nvls_out),
        _cut_s(np.full(n, t.nvls_in), fabric.nvls_in),
    )  # fmt: skip


def _cut_through_s(
    cand: Candidate, collective: str, s: float, piece: float, step: float, cta: float
) -> float:
    """The least time a pipelined hop holds its successor back: a cut-through dependency is
    released once the predecessor has moved ``min(step, its bytes)`` (:mod:`scaleup.sim.pipeline`),
    at most at one thread block's rate. Its bytes are ``piece`` cut into the schedule's chunks;
    twice the chunk count :func:`~scaleup.tune.rules.chunks_for` gives at ``s`` bytes is taken,
    so that a size rounded across a power of two between the request and ``s`` stays covered."""
    chunks = 2 * chunks_for(cand.algorithm, collective, int(s), cand.channels, cand.protocol)
    moved = min(step, piece / chunks)
    return moved / cta if moved >= _MIN_CUT_THROUGH_BYTES else 0.0


def lower_bound_s(
    topology: Topology,
    group: Sequence[int] | None,
    fabric: GroupFabric,
    collective: str,
    cand: Candidate,
    count: float,
    *,
    params: Mapping[str, Any],
    dtype: str = "float32",
    root: int = 0,
    step_bytes: float | None = None,
) -> float:
    """A time the simulator never beats for ``cand`` running ``collective`` of ``count``
    elements of ``dtype`` on ``group`` (see the module for the terms and why each holds).
    ``params``: the builder parameters the candidate's schedule would be built with (ring
    ``orders``, tree ``parents``, ``ranks_per_node``; :meth:`GroupShape.params
    <scaleup.tune.channels.GroupShape.params>`), the builders' defaults where absent.
    ``step_bytes``: the step a pipelined candidate runs with at this size where the caller
    sets it (:meth:`Question.step_bytes <scaleup.tune.question.Question.step_bytes>`), else the
    protocol's slot (:func:`~scaleup.tune.rules.step_bytes_for`).

    Examples
    --------
    >>> from scaleup.topology import resolve_topology
    >>> t = resolve_topology("dgx-h100")
    >>> ring = Candidate("ring", "simple", 16)
    >>> bound = lower_bound_s(t, None, GroupFabric.of(t, None), "all_reduce", ring, 1 << 28,
    ...                       params={})
    >>> round(bound * 1e6)  # 2 x 7/8 x 1 GiB over 18 NVLink4 links at 20.6 GB/s, plus launch
    5083
    """
    proto = for_topology(protocol(cand.protocol), topology, group)
    nvls = cand.algorithm in ("nvls", "nvls_tree")
    start = host_launch_s(topology) + (0.0 if nvls else proto.launch_latency_s)
    n = fabric.nranks
    if n < 2 or collective == "send_recv":
        return start / _MARGIN
    s = float(count) * itemsize(dtype)
    t = terms(collective, cand, fabric, params, s, root)
    eff = proto.payload_efficiency
    cta = max(proto.cta_bytes_per_s(a) for a in fabric.archs)
    bw = _cuts_s(t, fabric) / eff if fabric.peer_access else 0.0
    if t.tags > 0 and cta > 0:
        bw = max(bw, t.fabric_bytes / (n * t.tags * cta))
    alpha = min(float(proto.step_latency_s.get(c, 0.0)) for c in _P2P_CLASSES)
    switch = P.SWITCH_STEP_LATENCY_S
    latency = t.chain * alpha + t.any_chain * min(alpha, switch) + t.switch_chain * switch
    step = step_bytes_for(cand.algorithm, collective, cand.protocol)
    if step is not None and step_bytes is not None:
        step = step_bytes
    if t.chain_bytes > 0 and step is None:
        latency += t.chain * t.chain_bytes / cta  # each op moves its block, then releases
    if t.chain_piece > 0 and step is not None:
        latency += t.chain * _cut_through_s(cand, collective, s, t.chain_piece, step, cta)
    # no op moves a byte before it has paid its own step latency after the start
    first = P.SWITCH_STEP_LATENCY_S if t.switch_only else min(alpha, switch)
    return start + max(first + bw if bw > 0 else 0.0, latency) / _MARGIN
