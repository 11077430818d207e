"""One server's part of the channel search: its arcs and the routes of its channels' hops.

A :class:`NodeGraph` holds what one server offers its channels: the *arcs* (directed channels of
the topology between the server's own devices, plus each NIC's link into the scale-out fabric)
with their bandwidth, and the *load* of every hop a channel may take, as fractions of the
channel's bytes on arcs. A hop between two directly linked accelerators loads that one arc; any
other hop follows the shortest paths by hop count (hosts only when there is no other way), split at
every device over the next arcs in proportion to their bandwidth, as the simulator routes
(:mod:`scaleup.sim.network`). Routes are made symmetric (``b -> a`` mirrors ``a -> b``) so that a
path reversed on an odd server loads the reversed arcs exactly as much. Each member's NIC is the
nearest one (ties spread round the members); entering loads the NIC's fabric arc inbound and the
route NIC -> member, leaving the route member -> NIC and the fabric arc outbound.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from scipy.sparse import csr_matrix
from scipy.sparse.csgraph import shortest_path

from scaleup import hardware
from scaleup.collectives.op_table import csr_rows
from scaleup.errors import NoRouteError
from scaleup.topology.model import Channel, NodeKind, Topology

__all__ = ["CHAIN", "PATH", "REL_TOL", "RING", "Load", "NodeGraph", "is_network", "merge"]

RING, PATH, CHAIN = "ring", "path", "chain"
REL_TOL = 1e-9  #: relative tolerance on bandwidth sums (speeds are quotients of capacities)
Load = tuple[tuple[int, float], ...]  #: (arc index, fraction of a channel's bytes on it)


def is_network(tech: str) -> bool:
    """Whether a link technology is scale-out (InfiniBand, Ethernet not scoped as scale-up)."""
    link = hardware.link_tech(tech)  # Ethernet scoped as scale-up (UALink over Ethernet) is not
    return str(link.family) in ("infiniband", "ethernet") and str(link.scope) != "scale-up"


def merge(*loads: Load) -> Load:
    """The sum of several loads, one entry per arc, by arc index."""
    total: dict[int, float] = {}
    for load in loads:
        for arc, frac in load:
            total[arc] = total.get(arc, 0.0) + frac
    return tuple(sorted(total.items()))


class NodeGraph:
    """The search problem of one server: ``members`` (accelerator ids, rank order), ``arcs``
    (``(src, dst)`` ids) with ``capacity`` (bytes/s), hop loads and each member's NIC."""

    def __init__(
        self,
        topology: Topology,
        members: Sequence[str],
        devices: Sequence[str],
        channels: Sequence[Channel],
    ) -> None:
        self.members = tuple(members)
        self.n = len(self.members)
        self.local = {dev: i for i, dev in enumerate(devices)}
        kinds = self.kinds = {d: topology.device(d).kind for d in devices}
        self.nics = [d for d in devices if kinds[d] is NodeKind.NIC]
        arcs: list[tuple[str, str]] = []
        caps: list[float] = []
        self._net: dict[tuple[str, bool], int] = {}  # (nic, outbound) -> its fabric arc
        for c in channels:
            inside = (c.src in self.local, c.dst in self.local)
            if inside == (True, True) or (
                any(inside) and (c.src in self.nics or c.dst in self.nics) and is_network(c.tech)
            ):
                if not all(inside):
                    self._net[(c.src, True) if inside[0] else (c.dst, False)] = len(arcs)
                arcs.append((c.src, c.dst))
                caps.append(c.bandwidth_bytes_per_s)
        self.arcs = tuple(arcs)
        self.capacity = tuple(caps)
        self.arc_index = {a: i for i, a in enumerate(arcs)}
        #: arcs (indices) leaving each device: per-member sums without a scan of every arc
        self.arcs_out: dict[str, list[int]] = {}
        for a, (u, _) in enumerate(arcs):
            self.arcs_out.setdefault(u, []).append(a)
        self._routing(kinds)
        self.prepare()
        self._hops: dict[tuple[int, int], Load] = {}
        self._caps_out: dict[tuple[int, bool], tuple[float, ...] | None] = {}
        pos = {m: i for i, m in enumerate(self.members)}
        self.direct = {(pos[u], pos[v]) for u, v in arcs if u in pos and v in pos}
        self.switched = not self.direct
        self.nic_of: list[str | None] = [self._nearest_nic(i) for i in range(self.n)]
        self.rail = [None if x is None else self.nics.index(x) for x in self.nic_of]
        self.nic_in = [self._nic_load(i, inbound=True) for i in range(self.n)]
        self.nic_out = [self._nic_load(i, inbound=False) for i in range(self.n)]

    # -- routes ----------------------------------------------------------------------------
    def _routing(self, kinds: dict[str, NodeKind]) -> None:
        """Arrays of the arcs devices may forward on (never out of a NIC or a fabric arc)."""
        size = len(self.local)
        keep = [
            i
            for i, (u, v) in enumerate(self.arcs)
            if u in self.local and v in self.local and kinds[u] is not NodeKind.NIC
        ]
        self._u = np.array([self.local[self.arcs[i][0]] for i in keep], dtype=np.int64)
        self._v = np.array([self.local[self.arcs[i][1]] for i in keep], dtype=np.int64)
        self._arc = np.array(keep, dtype=np.int64)
        self._cap = np.array([self.capacity[i] for i in keep])
        host = np.array([kinds[d] is NodeKind.HOST for d in self.local])
        self._hostless = ~(host[self._u] | host[self._v]) if len(keep) else np.zeros(0, bool)
        #: the forwarding arcs' positions grouped by tail device (ascending inside a group), so
        #: a route reads the arcs of the devices on its shortest paths, not every arc
        self._by_tail = np.argsort(self._u, kind="stable")
        self._tail_ptr = np.zeros(size + 1, dtype=np.int64)
        np.cumsum(np.bincount(self._u, minlength=size), out=self._tail_ptr[1:])
        self._graphs = {}
        for with_hosts in (False, True):
            sel = np.ones(len(keep), bool) if with_hosts else self._hostless
            ones = np.ones(int(sel.sum()))
            self._graphs[with_hosts] = csr_matrix(
                (ones, (self._u[sel], self._v[sel])), shape=(size, size)
            )
        self._dist: dict[tuple[bool, bool, int], np.ndarray] = {}

    def prepare(self) -> None:
        """Hop counts from and to every member in two calls (a large switched server asks for
        one route per member)."""
        idx = [self.local[m] for m in self.members]
        graph = self._graphs[False]
        symmetric = (graph != graph.T).nnz == 0  # then "to" distances are "from" distances
        for to in (False, True):
            if to and symmetric:
                for i in idx:
                    self._dist[(False, True, i)] = self._dist[(False, False, i)]
                break
            rows = shortest_path(graph.T if to else graph, unweighted=True, indices=idx)
            for i, row in zip(idx, np.atleast_2d(rows), strict=True):
                self._dist[(False, to, i)] = row

    def _distance(self, with_hosts: bool, device: int, *, to: bool) -> np.ndarray:
        key = (with_hosts, to, device)
        if key not in self._dist:
            graph = self._graphs[with_hosts]
            self._dist[key] = shortest_path(
                graph.T if to else graph, unweighted=True, indices=device
            )
        return self._dist[key]

    def route(self, src: str, dst: str) -> Load:
        """Load of one byte from device ``src`` to ``dst`` over the shortest paths (see module)."""
        s, t = self.local[src], self.local[dst]
        for with_hosts in (False, True):
            ds = self._distance(with_hosts, s, to=False)
            dt = self._distance(with_hosts, t, to=True)
            hops = ds[t]
            if math.isfinite(hops):
                break
        else:
            raise NoRouteError(f"no path from {src} to {dst}", source=src, entry=dst)
        on_path = np.flatnonzero(ds + dt == hops)  # devices on a shortest path
        cand = np.sort(self._by_tail[csr_rows(self._tail_ptr, on_path)])
        on = ds[self._u[cand]] + 1 + dt[self._v[cand]] == hops
        if not with_hosts:
            on &= self._hostless[cand]
        idx = cand[on]
        inflow = np.zeros(len(self.local))
        inflow[s] = 1.0
        arcs, fracs = [], []
        for level in range(int(hops)):  # an arc is on one level (its tail's distance): once
            sel = idx[ds[self._u[idx]] == level]
            u, w = self._u[sel], self._cap[sel]
            wsum = np.bincount(u, weights=w, minlength=len(inflow))
            frac = inflow[u] * w / wsum[u]
            np.add.at(inflow, self._v[sel], frac)
            arcs.append(self._arc[sel])
            fracs.append(frac)
        arc, frac = np.concatenate(arcs), np.concatenate(fracs)
        keep = frac > 0
        arc, frac = arc[keep], frac[keep]
        order = np.argsort(arc, kind="stable")
        return tuple(zip(arc[order].tolist(), frac[order].tolist(), strict=True))

    def mirror(self, load: Load) -> Load:
        """The same load on the reversed arcs."""
        return tuple(sorted((self.arc_index[self.arcs[a][::-1]], f) for a, f in load))

    def hop(self, i: int, j: int) -> Load:
        """Load of a hop from member ``i`` to member ``j`` (symmetric: j -> i mirrors it)."""
        key = (i, j)
        if key not in self._hops:
            if (i, j) in self.direct:
                load: Load = ((self.arc_index[(self.members[i], self.members[j])], 1.0),)
            elif i < j:
                load = self.route(self.members[i], self.members[j])
            else:
                load = self.mirror(self.hop(j, i))
            self._hops[key] = load
        return self._hops[key]

    # -- NICs ------------------------------------------------------------------------------
    def _nearest_nic(self, i: int) -> str | None:
        if not self.nics:
            return None
        s = self.local[self.members[i]]
        for with_hosts in (False, True):
            dist = self._distance(with_hosts, s, to=False)
            d = [dist[self.local[x]] for x in self.nics]
            best = min(d)
            if math.isfinite(best):
                ties = [x for x, v in zip(self.nics, d, strict=True) if v == best]
                return ties[i % len(ties)]
        return None

    def _nic_load(self, i: int, *, inbound: bool) -> Load | None:
        nic = self.nic_of[i]
        if nic is None:
            return None
        out = self.route(self.members[i], nic)
        wire = self._net.get((nic, not inbound))
        load = self.mirror(out) if inbound else out
        return merge(load, ((wire, 1.0),)) if wire is not None else load

    # -- bounds ----------------------------------------------------------------------------
    def out_capacity(self, members: Sequence[int]) -> float:
        """Bandwidth of every arc leaving the given members' devices (a cut: each channel path
        must leave any proper subset of the members, or its last member, at least once)."""
        inside = {self.members[i] for i in members}
        return sum(
            c for (u, v), c in zip(self.arcs, self.capacity, strict=True)
            if u in inside and v not in inside
        )  # fmt: skip

    def port_capacity(self, i: int) -> float:
        """Bandwidth out of member ``i`` into the scale-up fabric (not to NICs or hosts)."""
        fabric = (NodeKind.ACCELERATOR, NodeKind.SWITCH)
        return sum(
            self.capacity[a]
            for a in self.arcs_out.get(self.members[i], ())
            if self.kinds.get(self.arcs[a][1]) in fabric
        )

    def unit_bound(self, i: int, speed: float, nic: bool) -> int:
        """Channels through member ``i`` that fit at ``speed`` counted link by link, when every
        hop out of ``i`` takes one whole arc (direct links; ``nic``: also the way to its NIC)."""
        caps = self._out_caps(i, nic)
        if caps is None:
            return len(self.arcs) * int(max(self.capacity) / speed + 1)  # no bound by units
        return sum(int(c / speed * (1 + REL_TOL)) for c in caps)

    def _out_caps(self, i: int, nic: bool) -> tuple[float, ...] | None:
        key = (i, nic)
        if key not in self._caps_out:
            out = self.arcs_out.get(self.members[i], [])
            load = self.nic_out[i] if nic else None
            whole = load is None or all(f == 1.0 for a, f in load if a in out)
            self._caps_out[key] = tuple(self.capacity[a] for a in out) if whole else None
        return self._caps_out[key]
