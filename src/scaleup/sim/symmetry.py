"""Symmetry classes: time one representative of every set of transfers that behave alike.

A collective on a regular fabric repeats itself: on ``16xdgx-h100`` every server's eight ranks do
what server 0's do, shifted by eight ranks, over links that are server 0's links shifted by one
server; on a UALink pod of 1,024 accelerators a ring's ranks are one rank's ops rotated. Such ops
start and end at the same instants, and max-min fair sharing gives such flows the same rate (the
allocation is unique, so it is invariant under every automorphism of the system). The simulator
therefore runs the *quotient*: the ops of a fundamental domain of ranks (``step`` ranks), each
standing for ``m = n / step`` ops, and one constraint per orbit of constraints. A flow class of
multiplicity ``m`` puts ``m / |C| * sum_{c in C} use(f, c)`` on the orbit ``C`` of constraints it
crosses (its ``m`` members spread evenly over the ``|C|`` members of the orbit), which is
weighted progressive filling: the rates, and so every op's start and end, are those of the
exact per-flow run (up to floating-point rounding of the sums).

Nothing is assumed: the generator (a shift of the ranks by ``step``, with the device permutation
it induces: accelerators shift, devices of a server named ``n{i}.*`` move to the shifted server,
the other devices are matched by their neighbours) is *checked* on the compiled system: every
op's image has the same kind, count, channel tag, latency, mapped peers and mapped dependencies,
every variable's image crosses the image constraints with the same coefficients, and image
constraints have the same capacity. Where any check fails (a failed or degraded link, an uneven
mesh, a subset of ranks that breaks the pattern) there is no quotient and the run is exact per
flow; ``CompiledSchedule.run(..., exact=True)`` (``scaleup bench --exact``) always is.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
from scipy.sparse import coo_matrix
from scipy.sparse.csgraph import connected_components

from scaleup.collectives.schedule import _csr_rows
from scaleup.sim.fairshare import merge_constraints
from scaleup.sim.pipeline import Pipeline
from scaleup.sim.protocols import Protocol

if TYPE_CHECKING:
    from scaleup.sim.simulate import CompiledSchedule

__all__ = ["Quotient", "Symmetry", "find_symmetry"]

_RTOL = 1e-9  # latencies and coefficients computed along image routes may round differently


@dataclass(frozen=True)
class Symmetry:
    """A shift of the ranks by ``step`` under which a compiled schedule is invariant.

    ``order`` (m) ops form each orbit; ``rep_ops`` are the fundamental domain's ops (ranks
    ``0 .. step-1``), ``rep_of_op[i]`` the quotient index of op ``i``'s representative,
    ``op_image[i]`` the op that ``i`` maps to, ``con_image[c]`` the constraint ``c`` maps to
    (network constraints, then thread blocks; -1 where the generator does not say).
    """

    step: int
    order: int
    rep_ops: np.ndarray
    rep_of_op: np.ndarray
    op_image: np.ndarray
    con_image: np.ndarray


def find_symmetry(c: CompiledSchedule) -> Symmetry | None:
    """A rank permutation with equal cycles the schedule is invariant under, or None.

    Candidates send rank 0 to a rank of the next server (or, on one server, to rank 1 or
    n - 1); the rest of the permutation follows from the ops (the p-th op of rank ``a`` maps to
    the p-th op of its image, so their peers map too), then everything is checked."""
    n = c.schedule.nranks
    if n < 2 or not c.n_ops or not np.array_equal(c.rank_map, np.arange(n)):
        return None
    t = c.topology
    rpn = t.ranks_per_node
    if len(t.nodes) > 1 and n == len(t.accelerators):
        targets = list(range(rpn, 2 * rpn))
    else:
        targets = sorted({1, n - 1})
    ranks = _RankOps(c)
    for target in targets:
        sigma = ranks.propagate(target)
        if sigma is None:
            continue
        cycles = _cycles(sigma)
        if cycles is None:
            continue
        rep_rank, order = cycles
        op_image = ranks.op_image(sigma)
        if op_image is None:
            continue
        con_image = _constraint_image(c, sigma)
        if con_image is None:
            continue
        rep_full = ranks.same_position(rep_rank[ranks.rank])
        rep_ops = np.flatnonzero(rep_rank[ranks.rank] == ranks.rank)
        rep_of_op = np.searchsorted(rep_ops, rep_full)
        return Symmetry(n // order, order, rep_ops, rep_of_op, op_image, con_image)
    return None


class _RankOps:
    """Each rank's ops in table order, and their peers, for building and checking a symmetry."""

    def __init__(self, c: CompiledSchedule) -> None:
        t = self.table = c.schedule.table
        self.n = c.schedule.nranks
        self.rank = t.rank.astype(np.int64)
        n_ops = len(self.rank)
        self.counts = np.bincount(self.rank, minlength=self.n)
        self.order = np.lexsort((np.arange(n_ops), self.rank))
        self.start = np.concatenate([[0], np.cumsum(self.counts)])[:-1]
        self.pos = np.empty(n_ops, dtype=np.int64)
        self.pos[self.order] = np.arange(n_ops) - self.start[self.rank[self.order]]
        self.src = t.src_rank[t.src_ptr[:-1]].astype(np.int64)
        self.dst = t.dst_rank[t.dst_ptr[:-1]].astype(np.int64)

    def same_position(self, target_rank: np.ndarray) -> np.ndarray:
        """For every op (the p-th of its rank): the p-th op of ``target_rank``."""
        return self.order[self.start[target_rank] + self.pos]

    def propagate(self, target: int) -> np.ndarray | None:
        """The rank permutation sending 0 to ``target`` that the ops imply, or None."""
        sigma = np.full(self.n, -1, dtype=np.int64)
        sigma[0] = target
        queue = [0]
        while queue:
            a = queue.pop()
            b = int(sigma[a])
            if self.counts[a] != self.counts[b]:
                return None
            ops_a = self.order[self.start[a] : self.start[a] + self.counts[a]]
            ops_b = self.order[self.start[b] : self.start[b] + self.counts[b]]
            x = np.concatenate([self.src[ops_a], self.dst[ops_a]])
            y = np.concatenate([self.src[ops_b], self.dst[ops_b]])
            pairs = np.unique(x * self.n + y)
            x, y = pairs // self.n, pairs % self.n
            if len(np.unique(x)) != len(x):
                return None  # one rank would map to two
            known = sigma[x] >= 0
            if not np.array_equal(sigma[x[known]], y[known]):
                return None
            sigma[x[~known]] = y[~known]
            queue += x[~known].tolist()
        if (sigma < 0).any() or len(np.unique(sigma)) != self.n:
            return None
        return sigma

    def op_image(self, sigma: np.ndarray) -> np.ndarray | None:
        """The op each op maps to under ``sigma``, if the op DAG is invariant."""
        t = self.table
        img = self.same_position(sigma[self.rank])
        for col in (t.kind, t.count, t.channel):
            if not np.array_equal(col[img], col):
                return None
        for ptr, vals in ((t.src_ptr, t.src_rank), (t.dst_ptr, t.dst_rank), (t.dep_ptr, t.dep_idx)):
            vals = np.asarray(vals, dtype=np.int64)
            mapped = img[vals] if ptr is t.dep_ptr else sigma[vals]
            if not _rows_match(ptr, mapped, vals, img):
                return None
        return img


def _cycles(sigma: np.ndarray) -> tuple[np.ndarray, int] | None:
    """(the first rank of each rank's cycle, the common cycle length), or None when the cycles
    differ in length or sigma is the identity."""
    n = len(sigma)
    rep = np.arange(n)
    cur = sigma.copy()
    length = 1
    while not np.array_equal(cur, np.arange(n)):
        rep = np.minimum(rep, cur)
        cur = sigma[cur]
        length += 1
        if length > n:
            return None
    if length < 2 or n % length:
        return None
    sizes = np.bincount(rep, minlength=n)[np.unique(rep)]
    if not (sizes == length).all():
        return None
    return rep, length


def _rows_match(ptr: np.ndarray, mapped: np.ndarray, vals: np.ndarray, img: np.ndarray) -> bool:
    """Whether row ``img[i]`` of the CSR (``ptr``, ``vals``) holds, as a multiset, row ``i`` of
    ``mapped`` for every row ``i``."""
    length = np.diff(ptr)
    if not np.array_equal(length[img], length):
        return False
    if (length == 1).all():  # one entry per row: compare in place
        return bool(np.array_equal(mapped, vals[ptr[:-1][img]]))
    owner = np.repeat(np.arange(len(length), dtype=np.int64), length)
    width = int(max(mapped.max(initial=0), vals.max(initial=0))) + 1
    ours = np.sort(owner * width + mapped)
    theirs = np.sort(owner * width + vals[_csr_rows(ptr, img)])
    return bool(np.array_equal(ours, theirs))


def _device_image(c: CompiledSchedule, sigma: np.ndarray) -> np.ndarray | None:
    """The device permutation ``sigma`` induces: accelerators move with their ranks, every
    other device goes where its neighbours go (:func:`_match_neighbours`), or None."""
    net = c.net
    tau = np.full(net.n_devices, -1, dtype=np.int64)
    acc = net.acc_devices
    tau[acc[: len(sigma)]] = acc[sigma]
    return _match_neighbours(c, tau)


def _match_neighbours(c: CompiledSchedule, tau: np.ndarray) -> np.ndarray | None:
    """Extend ``tau`` to the devices it leaves open: each goes to a device of its type that
    neighbours the images of its mapped neighbours (itself when it does)."""
    net = c.net
    open_ = [int(d) for d in np.flatnonzero(tau < 0)]
    if not open_:
        return tau
    types = [d.type for d in c.topology.devices]
    nbrs: dict[int, set[int]] = {}
    for a, b in zip(net.ch_src.tolist(), net.ch_dst.tolist(), strict=True):
        nbrs.setdefault(a, set()).add(b)
    taken = set(tau[tau >= 0].tolist())
    while open_:
        rest = []
        for f in open_:
            known = [int(tau[g]) for g in nbrs.get(f, ()) if tau[g] >= 0]
            if not known:
                rest.append(f)
                continue
            cands = set.intersection(*(nbrs.get(k, set()) for k in known)) - taken
            cands = {g for g in cands if types[g] == types[f]}
            if not cands:
                return None
            tau[f] = f if f in cands else min(cands)
            taken.add(int(tau[f]))
        if len(rest) == len(open_):  # the rest is not connected to what moves: it stays put
            for f in rest:
                tau[f] = f if f not in taken else -1
            break
        open_ = rest
    return tau


def _constraint_image(c: CompiledSchedule, sigma: np.ndarray) -> np.ndarray | None:
    """Image of every network constraint and thread block under ``sigma`` (-1: unknown)."""
    net = c.net
    tau = _device_image(c, sigma)
    if tau is None:
        return None
    n_dev, n_acc = net.n_devices, len(net.acc_devices)
    rank_of_dev = np.full(n_dev, -1, dtype=np.int64)
    rank_of_dev[net.acc_devices] = np.arange(n_acc)
    acc_image = rank_of_dev[tau[net.acc_devices]]  # accelerator index -> its image's
    if (acc_image < 0).any():
        return None
    image = np.full(net.n_constraints + c.n_cta, -1, dtype=np.int64)
    # channels: the channel between the images of its ends (the k-th of parallel ones)
    code = net.ch_src * n_dev + net.ch_dst
    ok = (tau[net.ch_src] >= 0) & (tau[net.ch_dst] >= 0)
    img_code = np.where(ok, tau[net.ch_src] * n_dev + tau[net.ch_dst], -1)
    order = np.argsort(code, kind="stable")
    sorted_code = code[order]
    first = np.searchsorted(sorted_code, code)
    occurrence = np.empty(len(code), dtype=np.int64)
    occurrence[order] = np.arange(len(code)) - first[order]
    at = np.searchsorted(sorted_code, img_code) + occurrence
    hit = ok & (at < len(code))
    hit[hit] &= sorted_code[at[hit]] == img_code[hit]
    image[: net.n_channels][hit] = order[at[hit]]
    image[net.hbm] = net.hbm[acc_image]
    if net.virtual_hosts:
        image[net.vup] = net.vup[acc_image]
        image[net.vdown] = net.vdown[acc_image]
        vh = net.host_mem[net.vhost_of_rank]
        vh_img = net.host_mem[net.vhost_of_rank[acc_image]]
        image[vh] = vh_img
        conflict = image[vh] != vh_img
        image[vh[conflict]] = -1
    else:
        for dev, row in net.host_mem_of_device.items():
            target = int(tau[dev])
            image[row] = net.host_mem_of_device.get(target, -1) if target >= 0 else -1
    # thread blocks: (issuing rank, channel tag) -> (its image, same tag)
    ctas = list(zip(c.cta_rank.tolist(), c.cta_channel.tolist(), strict=True))
    key = {cta: j for j, cta in enumerate(ctas)}
    base = net.n_constraints
    for j, (r, ch) in enumerate(ctas):
        k = key.get((int(acc_image[r]), ch))
        image[base + j] = -1 if k is None else base + k
    return image


class Quotient:
    """The representative ops of a :class:`Symmetry`, shaped like a compiled schedule for
    :class:`~scaleup.sim.run.Run`, for one protocol. Build with :meth:`of` (None when the
    compiled system is not invariant under the symmetry for this protocol)."""

    def __init__(self, c: CompiledSchedule, sym: Symmetry, parts: dict[str, Any]) -> None:
        self.full = c
        self.sym = sym
        self.topology = c.topology
        self.net = c.net
        self.schedule = c.schedule
        t = c.schedule.table
        rep = sym.rep_ops
        self.n_ops = len(rep)
        self.count = c.count[rep]
        entries = _csr_rows(t.dep_ptr, rep)
        n_deps = t.dep_ptr[rep + 1] - t.dep_ptr[rep]
        self.n_deps = n_deps.astype(np.int64)
        self.dep_ptr = np.concatenate([[0], np.cumsum(n_deps)]).astype(np.int64)
        self.dep_idx = sym.rep_of_op[t.dep_idx[entries]]
        owner = np.repeat(np.arange(self.n_ops, dtype=np.int64), n_deps)
        order = np.argsort(self.dep_idx, kind="stable")
        self.succ_idx = owner[order]
        self.succ_ptr = np.concatenate(
            [[0], np.cumsum(np.bincount(self.dep_idx, minlength=self.n_ops))]
        ).astype(np.int64)
        full_pipe = c.pipeline()
        dep_stream = full_pipe.dep_stream[entries]
        conn = full_pipe.conn_pred[rep]
        self._pipeline = Pipeline(
            dep_stream[order],
            dep_stream,
            full_pipe.streams_out[rep],
            np.where(conn >= 0, sym.rep_of_op[np.maximum(conn, 0)], -1),
        )
        self.var_of_op = parts["var_of_op"]
        self.n_vars = parts["n_vars"]
        self._system: tuple[Any, np.ndarray, np.ndarray, dict[bytes, Any]] = (
            parts["system"],
            parts["capacity"],
            parts["latency"][rep],
            {},
        )
        self._merged = merge_constraints(parts["system"], parts["capacity"])
        self.orbit = parts["orbit"]  # full constraint -> quotient constraint (-1: unused)

    @classmethod
    def of(cls, c: CompiledSchedule, sym: Symmetry, proto: Protocol) -> Quotient | None:
        """The quotient for ``proto``, or None if the system is not invariant (see module)."""
        parts = _quotient_system(c, sym, proto)
        return None if parts is None else cls(c, sym, parts)

    def system(self, proto: Protocol) -> tuple[Any, np.ndarray, np.ndarray, dict[bytes, Any]]:
        """The quotient system (usage columns, capacity, latency per op, rate memo)."""
        return self._system

    def merged_system(self, proto: Protocol) -> tuple[np.ndarray, ...]:
        """The quotient system with interchangeable constraints merged."""
        return self._merged

    def pipeline(self) -> Pipeline:
        """The pipelining structure of the representative ops."""
        return self._pipeline

    def start_s(self, proto: Protocol) -> float:
        """When the roots are released (the full schedule's start)."""
        return self.full.start_s(proto)


def _quotient_system(c: CompiledSchedule, sym: Symmetry, proto: Protocol) -> dict[str, Any] | None:
    (col_ptr, row, use, carried), capacity, latency, _memo = c.system(proto)
    img = sym.op_image
    if not np.allclose(latency[img], latency, rtol=_RTOL, atol=0.0):
        return None
    var_img = np.full(c.n_vars, -1, dtype=np.int64)
    var_img[c.var_of_op] = c.var_of_op[img]
    if not np.array_equal(var_img[c.var_of_op], c.var_of_op[img]):
        return None  # two ops of one variable map to different variables
    con_img = sym.con_image
    lens = np.diff(col_ptr)
    if not np.array_equal(lens[var_img], lens):
        return None
    mapped = con_img[row]
    if (mapped < 0).any():
        return None
    owner = np.repeat(np.arange(c.n_vars), lens)
    a = np.lexsort((mapped, owner))
    b_ent = _csr_rows(col_ptr, var_img)
    b = np.lexsort((row[b_ent], owner))
    if not np.array_equal(mapped[a], row[b_ent][b]):
        return None
    if not np.allclose(use[a], use[b_ent][b], rtol=_RTOL, atol=0.0):
        return None
    if not np.allclose(carried[a], carried[b_ent][b], rtol=_RTOL, atol=0.0):
        return None
    used = np.unique(row)
    in_used = np.zeros(len(capacity), dtype=bool)
    in_used[used] = True
    targets = con_img[used]
    if not in_used[targets].all() or len(np.unique(targets)) != len(used):
        return None
    if not np.allclose(capacity[targets], capacity[used], rtol=_RTOL, atol=0.0):
        return None
    # orbits of constraints: components of c -> image(c) over the used ones
    where = np.full(len(capacity), -1, dtype=np.int64)
    where[used] = np.arange(len(used))
    graph = coo_matrix(
        (np.ones(len(used)), (np.arange(len(used)), where[targets])), shape=(len(used),) * 2
    )
    n_orbits, label = connected_components(graph, directed=True, connection="weak")
    size = np.bincount(label, minlength=n_orbits)
    orbit = np.full(len(capacity), -1, dtype=np.int64)
    orbit[used] = label
    orbit_cap = np.zeros(n_orbits)
    orbit_cap[label] = capacity[used]
    # the representatives' variables, each standing for m flows spread over each orbit
    rep_vars, var_of_op = np.unique(c.var_of_op[sym.rep_ops], return_inverse=True)
    ent = _csr_rows(col_ptr, rep_vars)
    ent_var = np.repeat(np.arange(len(rep_vars)), lens[rep_vars])
    ent_orbit = orbit[row[ent]]
    weight = sym.order / size[ent_orbit]
    code = ent_var * n_orbits + ent_orbit
    uniq, inv = np.unique(code, return_inverse=True)  # sorted: by variable, then orbit
    q_use = np.bincount(inv, weights=use[ent] * weight, minlength=len(uniq))
    q_car = np.bincount(inv, weights=carried[ent] * weight, minlength=len(uniq))
    q_var = uniq // n_orbits
    q_ptr = np.concatenate([[0], np.cumsum(np.bincount(q_var, minlength=len(rep_vars)))])
    system = (q_ptr.astype(np.int64), (uniq % n_orbits).astype(np.int64), q_use, q_car)
    return {
        "system": system,
        "capacity": orbit_cap,
        "var_of_op": var_of_op.astype(np.int64),
        "n_vars": len(rep_vars),
        "orbit": orbit,
        "latency": latency,
    }
