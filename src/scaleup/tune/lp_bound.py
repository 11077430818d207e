"""The bandwidth lower bound of a collective on a fabric, from a linear program (HiGHS).

The tuner's own bounds (:mod:`scaleup.tune.bounds`) bound one *algorithm*; this module bounds
the *collective*: no schedule of any algorithm moves its data over ``topology``'s channels in less
time than :attr:`LpModel.seconds_per_byte` x ``S`` (``S`` the message size as nccl-tests prints
it). ``scaleup bench --explain`` sets the chosen algorithm's time against it.

Two formulations, both ``minimise T`` over flows ``f`` on the directed channels with ``f_e <=
capacity_e x T`` (capacity: the channel's rate times its link efficiency, the rate the simulator
gives it, :func:`scaleup.sim.paths.link_efficiency`), solved per byte of ``S`` (the bound is
linear in ``S``) by :func:`scipy.optimize.linprog` with ``method="highs"``:

- **multicommodity** (all_to_all, send_recv: distinct data per pair, which no device can merge or
  copy usefully): one commodity per source rank, its demand ``D[s, t]`` delivered to every
  rank ``t`` through any devices (ranks relay), flow conserved everywhere else; the commodities'
  flows add up on each channel. Exact for fractional routing. It has ``ranks x channels``
  variables; above :data:`MAX_LP_VARIABLES` the terminal formulation below stands instead (a
  weaker but valid bound; :attr:`LpModel.note` says so).
- **terminal flow** (all_reduce, all_gather, reduce_scatter, broadcast, reduce: data that ranks
  may copy, combine and relay): one flow on the channels; ranks (and switches that reduce or
  replicate in the network, catalog ``in_switch_reduction``) are free terminals, every other
  device (non-reducing switches, NICs, hosts, accelerators outside the group) conserves flow.
  Constraints: across every cut of the devices, the bytes that must cross it
  (:func:`cut_need`: the rank cuts ``{r}`` are each rank's export and import; with more than
  one server, each server is a cut too), and for all_reduce without in-network reduction the
  Patarasuk-Yuan count: every element needs ``2(n-1)`` rank-to-rank transmissions, so the ranks
  receive ``2(n-1) S`` bytes in all. A real schedule's channel loads satisfy every constraint,
  so the optimum is a lower bound.

Above :data:`MAX_LP_VARIABLES` even for the terminal LP (fabrics of ~100k channels) the bound is
the cut bound without routing: the largest ``need / capacity`` over the same cuts.

By hand (docs/models.md, "LP lower bound"): on ``n`` ranks behind one switch with per-rank
links of ``B`` bytes/s, all_gather's bound is ``(n-1)/n x S / B`` (each rank imports the other
blocks); all_reduce's ``2(n-1)/n x S / B`` when the switch does not reduce (the total count over
``n B`` of import capacity), ``S / B`` when it does (each rank must still import ``S``).

>>> from scaleup.topology import resolve_topology
>>> m = lp_lower_bound(resolve_topology("dgx-h100"), "all_gather")
>>> round(7 / 8 / m.seconds_per_byte / 1e9, 1)  # all_gather imports 7/8 S per GPU: GB/s
370.8
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy import sparse
from scipy.sparse.csgraph import shortest_path

from scaleup import hardware
from scaleup.collectives.spec import COLLECTIVES, busbw_factor
from scaleup.errors import SimulationError, UsageError
from scaleup.sim.paths import link_efficiency
from scaleup.topology.model import Topology

__all__ = ["MAX_LP_VARIABLES", "LpBound", "LpModel", "cut_need", "lp_lower_bound"]

#: Most variables of one LP (flows per channel and commodity, plus ``T``). Measured with HiGHS
#: (scipy 1.17, presolve off) on a shared core: the multicommodity all_to_all LP of
#: ``3xdgx-h100`` (6,913 variables) takes 0.2 s, of ``tpu-v5p`` (64 x 384 + 1 = 24,577) 37 s;
#: the terminal LPs of ``gb200-nvl72`` (2,593) 60 ms, ``vr-nvl72`` (5,185) 0.1-0.4 s and
#: ``2xgb200-nvl72`` (5,801) 0.7 s. 8,192 keeps every LP under a second and lets every preset's
#: terminal LP through.
MAX_LP_VARIABLES = 8192
#: HiGHS's optimum may sit above the exact one by its feasibility tolerance (1e-7, relative at
#: our scaling): dividing by this keeps the result a lower bound.
_MARGIN = 1.0 + 1e-6


@dataclass(frozen=True)
class LpModel:
    """The collective's lower bound on one fabric, per byte of the printed size ``S``.

    ``formulation``: ``multicommodity``, ``terminal flow`` or ``cut`` (no LP: over the size
    limit); ``in_network_reduction``: whether switches that reduce in the network were allowed
    to (so all_reduce's bound is ``S`` per rank, not ``2(n-1)/n S``); ``note``: why a weaker
    formulation stands, if one does."""

    collective: str
    nranks: int
    seconds_per_byte: float
    formulation: str
    in_network_reduction: bool
    variables: int
    note: str = ""

    def time_s(self, nbytes: float) -> float:
        """The lower bound for ``nbytes`` (the printed size)."""
        return self.seconds_per_byte * float(nbytes)

    def at(self, nbytes: int, chosen_time_s: float) -> LpBound:
        """The bound at ``nbytes`` set against a schedule that took ``chosen_time_s``."""
        bound_s = self.time_s(nbytes)
        busbw = nbytes / bound_s * busbw_factor(self.collective, self.nranks) if bound_s else 0.0
        return LpBound(
            bound_s, busbw / 1e9,
            chosen_time_s / bound_s if bound_s else None,
            bound_s / chosen_time_s if bound_s and chosen_time_s else None,
            self.formulation, self.in_network_reduction, self.note,
        )  # fmt: skip


@dataclass(frozen=True)
class LpBound:
    """:class:`LpModel` at one size against the chosen schedule: ``time_s`` the bound, its
    nccl-tests ``busbw_gb_per_s`` (the busbw no schedule can beat), ``time_over_bound`` the
    chosen time / the bound (>= 1), ``efficiency`` its inverse (the share of the best possible
    rate the choice reaches); both None where a time is 0 (one rank: nothing to move)."""

    time_s: float
    busbw_gb_per_s: float
    time_over_bound: float | None
    efficiency: float | None
    formulation: str
    in_network_reduction: bool
    note: str


def cut_need(collective: str, inside: Sequence[int], n: int, root: int = 0) -> tuple[float, float]:
    """Bytes per byte of ``S`` that must leave and enter a set of devices holding ranks
    ``inside`` (of ``n``), in any schedule of ``collective``.

    >>> cut_need("all_gather", [0], 4)  # rank 0 exports its block, imports three
    (0.25, 0.75)
    >>> cut_need("all_reduce", [0, 1], 4)  # every element, both ways
    (1.0, 1.0)
    """
    a = len(set(inside))
    b = n - a
    if a == 0 or b == 0:
        return 0.0, 0.0
    has_root = root in set(inside)
    if collective == "all_reduce":
        return 1.0, 1.0
    if collective == "all_gather":
        return a / n, b / n
    if collective == "reduce_scatter":
        return b / n, a / n
    if collective == "all_to_all":
        return a * b / n, a * b / n
    if collective == "broadcast":
        return (1.0, 0.0) if has_root else (0.0, 1.0)
    if collective == "reduce":
        return (0.0, 1.0) if has_root else (1.0, 0.0)
    if collective == "send_recv":
        members = set(inside)
        out = sum(1 for r in members if (r + 1) % n not in members)
        into = sum(1 for r in range(n) if r not in members and (r + 1) % n in members)
        return float(out), float(into)
    raise UsageError(
        f"no lower bound for collective {collective!r}; one of {', '.join(COLLECTIVES)}",
        source="collective",
    )


def _demands(collective: str, n: int) -> np.ndarray:
    """``D[s, t]``: bytes per byte of ``S`` rank ``s``'s own data sends to rank ``t``."""
    if collective == "all_to_all":
        d = np.full((n, n), 1.0 / n)
        np.fill_diagonal(d, 0.0)
        return d
    d = np.zeros((n, n))
    if n > 1:
        d[np.arange(n), (np.arange(n) + 1) % n] = 1.0
    return d


class _Fabric:
    """The channels as arrays: ends (device indices), capacities scaled to at most 1, and
    which devices are ranks of the group (by rank) and free terminals."""

    def __init__(self, t: Topology, ranks: Sequence[int]) -> None:
        index = {d.id: i for i, d in enumerate(t.devices)}
        self.n_devices = len(t.devices)
        self.src = np.array([index[c.src] for c in t.channels], dtype=np.int64)
        self.dst = np.array([index[c.dst] for c in t.channels], dtype=np.int64)
        eff = {tech: link_efficiency(tech) for tech in {c.tech for c in t.channels}}
        cap = np.array([c.bandwidth_bytes_per_s * eff[c.tech] for c in t.channels])
        self.unit_bytes_per_s = float(cap.max()) if len(cap) else 1.0
        self.cap = cap / self.unit_bytes_per_s
        self.rank_dev = np.array([index[t.accelerators[r].id] for r in ranks], dtype=np.int64)
        self.reducing = np.zeros(self.n_devices, dtype=bool)
        for d in t.switches:
            self.reducing[index[d.id]] = bool(hardware.switch_chip(d.type).in_switch_reduction)
        self.node = np.array([int(d.node) for d in t.devices], dtype=np.int64)
        self.n_channels = len(self.cap)

    def cuts(self) -> list[tuple[np.ndarray, list[int]]]:
        """(device mask, communicator ranks inside) of every cut: each rank alone, then each
        server when the group spans several."""
        out = []
        for i, dev in enumerate(self.rank_dev):
            mask = np.zeros(self.n_devices, dtype=bool)
            mask[dev] = True
            out.append((mask, [i]))
        rank_nodes = self.node[self.rank_dev]
        if len(set(rank_nodes.tolist())) > 1:
            for node in sorted(set(rank_nodes.tolist())):
                inside = [int(i) for i in np.flatnonzero(rank_nodes == node)]
                out.append((self.node == node, inside))
        return out


def _solve(c: np.ndarray, a_ub: sparse.csr_array, b_ub: np.ndarray,
           a_eq: sparse.csr_array | None, b_eq: np.ndarray | None) -> float:  # fmt: skip
    """``min c.x`` s.t. ``a_ub x <= b_ub``, ``a_eq x = b_eq``, ``x >= 0``: the optimum."""
    from scipy.optimize import linprog  # here: scipy.optimize costs ~0.3 s to import

    res = linprog(
        c,
        A_ub=a_ub,
        b_ub=b_ub,
        A_eq=a_eq,
        b_eq=b_eq,
        bounds=(0, None),
        method="highs",
        options={"presolve": False},  # HiGHS presolve took 1.5 s of a 35 ms LP (gb200-nvl72)
    )
    if res.status != 0:
        raise SimulationError(f"lower-bound LP not solved: {res.message}", source="lp_bound")
    return float(res.fun)


def _needs(
    fab: _Fabric, collective: str, n: int, root: int, in_network: bool
) -> list[tuple[np.ndarray, float]]:
    """(channel mask, bytes per byte of S it must carry in all), each > 0: both directions of
    every cut, and for all_reduce without in-network reduction the channels into the ranks with
    Patarasuk and Yuan's total ``2(n-1)``."""
    out: list[tuple[np.ndarray, float]] = []
    for mask, inside in fab.cuts():
        out_need, in_need = cut_need(collective, inside, n, root)
        out.append((mask[fab.src] & ~mask[fab.dst], out_need))
        out.append((~mask[fab.src] & mask[fab.dst], in_need))
    if collective == "all_reduce" and not in_network:
        out.append((np.isin(fab.dst, fab.rank_dev), 2.0 * (n - 1)))
    return [(crossing, amount) for crossing, amount in out if amount > 0]


def _terminal_lp(fab: _Fabric, collective: str, n: int, root: int, in_network: bool) -> float:
    """The terminal-flow LP's ``T`` (in scaled units). Variables: ``f`` per channel, then T."""
    e = fab.n_channels
    needs = _needs(fab, collective, n, root, in_network)
    rows = [-crossing.astype(np.float64) for crossing, _ in needs]
    need = [-amount for _, amount in needs]
    if not rows:
        return 0.0
    demand = sparse.csr_array(np.vstack(rows))
    cap_rows = sparse.hstack(
        [sparse.eye_array(e, format="csr"), sparse.csr_array(-fab.cap.reshape(-1, 1))]
    )
    a_ub = sparse.vstack([sparse.hstack([demand, sparse.csr_array((len(rows), 1))]), cap_rows])
    b_ub = np.concatenate([need, np.zeros(e)])
    conserve = np.ones(fab.n_devices, dtype=bool)
    conserve[fab.rank_dev] = False
    conserve &= ~fab.reducing
    a_eq = b_eq = None
    nodes = np.flatnonzero(conserve)
    if len(nodes):
        row_of = -np.ones(fab.n_devices, dtype=np.int64)
        row_of[nodes] = np.arange(len(nodes))
        a_eq = _incidence(fab, row_of, len(nodes), e + 1)
        b_eq = np.zeros(len(nodes))
    cost = np.zeros(e + 1)
    cost[-1] = 1.0
    return _solve(cost, sparse.csr_array(a_ub), b_ub, a_eq, b_eq)


def _incidence(fab: _Fabric, row_of: np.ndarray, n_rows: int, n_cols: int,
               col0: int = 0) -> sparse.csr_array:  # fmt: skip
    """Rows ``row_of[v]`` (devices with a row): ``+1`` for channels into ``v``, ``-1`` out."""
    e = np.arange(fab.n_channels)
    rin, rout = row_of[fab.dst], row_of[fab.src]
    keep_in, keep_out = rin >= 0, rout >= 0
    data = np.concatenate([np.ones(keep_in.sum()), -np.ones(keep_out.sum())])
    r = np.concatenate([rin[keep_in], rout[keep_out]])
    c = np.concatenate([e[keep_in], e[keep_out]]) + col0
    return sparse.csr_array((data, (r, c)), shape=(n_rows, n_cols))


def _multicommodity_lp(fab: _Fabric, demands: np.ndarray) -> float:
    """The multicommodity LP's ``T``: one commodity per source rank with a demand."""
    e = fab.n_channels
    sources = np.flatnonzero(demands.sum(axis=1) > 0)
    k = len(sources)
    n_vars = k * e + 1
    row_of = np.arange(fab.n_devices, dtype=np.int64)
    blocks, b_eq = [], []
    for j, s in enumerate(sources):
        blocks.append(_incidence(fab, row_of, fab.n_devices, n_vars, col0=j * e))
        supply = np.zeros(fab.n_devices)
        np.add.at(supply, fab.rank_dev, demands[s])
        supply[fab.rank_dev[s]] -= demands[s].sum()
        b_eq.append(supply)
    a_eq = sparse.vstack(blocks, format="csr")
    share = sparse.hstack([sparse.eye_array(e, format="csr")] * k)
    a_ub = sparse.hstack([share, sparse.csr_array(-fab.cap.reshape(-1, 1))], format="csr")
    cost = np.zeros(n_vars)
    cost[-1] = 1.0
    return _solve(cost, a_ub, np.zeros(e), a_eq, np.concatenate(b_eq))


def _cut_bound(fab: _Fabric, collective: str, n: int, root: int, in_network: bool) -> float:
    """The largest ``need / capacity`` over the cuts and, for all_reduce without in-network
    reduction, the total count over the ranks' import capacity; no routing (scaled units)."""
    best = 0.0
    for crossing, amount in _needs(fab, collective, n, root, in_network):
        capacity = float(fab.cap[crossing].sum())
        best = max(best, amount / capacity if capacity > 0 else math.inf)
    return best


def _distance_bound(fab: _Fabric, demands: np.ndarray) -> float:
    """LP duality with channel lengths ``l``: distinct data from ``s`` to ``t`` crosses at least
    ``dist_l(s, t)`` of length, so ``T >= sum D[s, t] dist_l(s, t) / sum cap_e l_e``; the larger
    of ``l = 1`` (hops) and ``l = 1 / cap`` (scaled units)."""
    best = 0.0
    for length, denominator in ((np.ones(fab.n_channels), float(fab.cap.sum())),
                                (1.0 / fab.cap, float(fab.n_channels))):  # fmt: skip
        graph = sparse.csr_array((length, (fab.src, fab.dst)), shape=(fab.n_devices, fab.n_devices))
        dist = shortest_path(graph, directed=True, indices=fab.rank_dev)[:, fab.rank_dev]
        if not np.isfinite(dist[demands > 0]).all():
            return math.inf
        best = max(best, float((demands * np.where(demands > 0, dist, 0.0)).sum()) / denominator)
    return best


def _model(t: Topology, collective: str, ranks: tuple[int, ...], root: int) -> LpModel:
    n = len(ranks)
    cut_need(collective, [0], max(n, 2), root)  # an unknown collective raises here
    fab = _Fabric(t, ranks)
    in_network = bool(fab.reducing.any())
    if n < 2 or fab.n_channels == 0:
        return LpModel(collective, n, 0.0, "none", in_network, 0, "nothing crosses a channel")
    note = ""
    if collective in ("all_to_all", "send_recv"):
        size = n * fab.n_channels + 1
        if size <= MAX_LP_VARIABLES:
            scaled = _multicommodity_lp(fab, _demands(collective, n))
            return _done(fab, collective, n, scaled, "multicommodity", False, size, note)
        note = (
            f"multicommodity LP of {size} variables over {MAX_LP_VARIABLES}: terminal flow "
            "and the hop-distance bound"
        )
    distance = _distance_bound(fab, _demands(collective, n)) if note else 0.0
    size = fab.n_channels + 1
    if size <= MAX_LP_VARIABLES:
        scaled = max(_terminal_lp(fab, collective, n, root, in_network), distance)
        return _done(fab, collective, n, scaled, "terminal flow", in_network, size, note)
    note = f"LP of {size} variables over {MAX_LP_VARIABLES}: cut bound without routing" + (
        " and the hop-distance bound" if note else ""
    )
    scaled = max(_cut_bound(fab, collective, n, root, in_network), distance)
    return _done(fab, collective, n, scaled, "cut", in_network, 0, note)


def _done(fab: _Fabric, collective: str, n: int, scaled: float, formulation: str,
          in_network: bool, size: int, note: str) -> LpModel:  # fmt: skip
    seconds_per_byte = scaled / fab.unit_bytes_per_s / _MARGIN
    return LpModel(collective, n, seconds_per_byte, formulation, in_network, size, note)


def lp_lower_bound(
    topology: Topology,
    collective: str,
    *,
    ranks: Sequence[int] | None = None,
    root: int = 0,
) -> LpModel:
    """The lower bound of ``collective`` on ``topology`` for the group ``ranks`` (default: every
    accelerator), per byte of the printed size: see the module. Cached per fabric and group.

    Raises :class:`~scaleup.errors.UsageError` for an unknown collective, a rank not on the
    fabric or a root outside the group.
    """
    n_all = len(topology.accelerators)
    group = tuple(range(n_all)) if ranks is None else tuple(int(r) for r in ranks)
    if any(not 0 <= r < n_all for r in group) or len(set(group)) != len(group):
        raise UsageError(f"ranks must be distinct, in 0..{n_all - 1}", source="ranks")
    if collective in ("broadcast", "reduce") and not 0 <= root < len(group):
        raise UsageError(f"root must be in 0..{len(group) - 1}, got {root}", source="root")
    return _model(topology, collective, group, root)
