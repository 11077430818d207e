"""Devices, channels and multipath shortest paths of a Topology, for the simulator's routes.

Split from :mod:`scaleup.sim.network` (which documents the routing rules and turns these paths
into constraints and routes) so that the channel arrays, the hop-count graphs, the cached
breadth-first distances and the bandwidth-proportional multipath split stand on their own.
"""

from __future__ import annotations

import numpy as np
from scipy.sparse import csr_matrix
from scipy.sparse.csgraph import shortest_path

from scaleup import hardware
from scaleup.arrays import unique
from scaleup.collectives.op_table import csr_rows
from scaleup.errors import NoRouteError
from scaleup.sim import params as P
from scaleup.topology.model import Channel, NodeKind, Topology
from scaleup.topology.torus import TorusTopology, dor_route

__all__ = ["FabricPaths", "link_class", "link_efficiency"]

_CLASS_OF_FAMILY = {"nvlink": 1, "xgmi": 1, "ualink": 1, "c2c": 1, "ici": 1,
                    "neuronlink": 1, "pcie": 2, "socket": 2,
                    "infiniband": 3, "ethernet": 3}  # fmt: skip


def link_class(tech: str) -> int:
    """The simulator's link class of a link technology (1 scale-up, 2 host, 3 network): by its
    family, except that an Ethernet link the catalog scopes as scale-up (Gaudi 3's on-die RoCE
    ports, UALink over Ethernet) is a scale-up link: the accelerator drives it without a host
    proxy, so the library's NET step latencies (a proxy thread and a NIC per step) do not apply."""
    link = hardware.link_tech(tech)
    if str(link.scope) == "scale-up":
        return 1
    return _CLASS_OF_FAMILY.get(str(link.family), 1)


#: A multipath split: (channel ids, fractions, per-device inflow, latency_s, link class).
PathSplit = tuple[np.ndarray, np.ndarray, np.ndarray, float, int]
#: a split as computed and cached: channel ids, fractions, the devices with inflow and theirs
#: (nonzeros only), latency, class
_CompactSplit = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, float, int]

#: The link class of network channels (:func:`link_class`: InfiniBand, Ethernet).
_NETWORK_CLASS = 3
#: Hop count standing for "no way" in the uint16 distance rows.
UNREACHABLE = 65535
#: Sources per BFS call (float64 rows of every device: ~170 MB at 42,240 devices).
_BFS_BATCH = 512


def link_efficiency(tech: str) -> float:
    """Payload fraction of a link's raw rate: catalog encoding x :data:`params.LINK_EFFICIENCY`."""
    spec = hardware.link_tech(tech)
    family = str(spec.family)
    if tech in P.LINK_EFFICIENCY:
        eff = P.LINK_EFFICIENCY[tech]
    elif family == "pcie":
        eff = P.PCIE_TLP_EFFICIENCY * P.PCIE_DLLP_EFFICIENCY
    else:
        eff = P.LINK_EFFICIENCY.get(family, 1.0)
    return float(spec.encoding_efficiency) * float(eff)


class FabricPaths:
    """Device and channel arrays of one topology (devices and channels in topology order), and
    its shortest paths by hop count, cached: distances per source, splits per device pair."""

    def __init__(self, topology: Topology) -> None:
        t = self.topology = topology
        dev_index = {d.id: i for i, d in enumerate(t.devices)}
        self.n_devices = len(t.devices)
        kinds = [d.kind for d in t.devices]
        self.is_host = np.array([k is NodeKind.HOST for k in kinds])
        self.is_acc = np.array([k is NodeKind.ACCELERATOR for k in kinds])
        self.acc_devices = np.array([dev_index[d.id] for d in t.accelerators], dtype=np.int64)
        self.dev_node = np.array([d.node for d in t.devices], dtype=np.int64)
        self.dev_latency = np.array([t.device_latency_s(d.id) for d in t.devices])
        channels = t.channels
        self.n_channels = len(channels)
        self.ch_src = np.array([dev_index[c.src] for c in channels], dtype=np.int64)
        self.ch_dst = np.array([dev_index[c.dst] for c in channels], dtype=np.int64)
        self.ch_latency = np.array([c.latency_s for c in channels])
        self.ch_class = np.array([link_class(c.tech) for c in channels], dtype=np.int64)
        eff = {tech: link_efficiency(tech) for tech in {c.tech for c in channels}}
        self.ch_capacity = np.array([c.bandwidth_bytes_per_s * eff[c.tech] for c in channels])
        self._calibrate(topology, channels)
        # graphs for hop-count BFS: without hosts (preferred) and with them
        self._graphs = {}
        for with_hosts in (False, True):
            keep = (
                np.ones(self.n_channels, dtype=bool)
                if with_hosts
                else ~(self.is_host[self.ch_src] | self.is_host[self.ch_dst])
            )
            self._graphs[with_hosts] = csr_matrix(
                (np.ones(int(keep.sum())), (self.ch_src[keep], self.ch_dst[keep])),
                shape=(self.n_devices,) * 2,
            )
        #: hop counts from a device, as uint16 (UNREACHABLE: none): kept for every source an op
        #: table routes from, so 8 bytes a device would be quadratic at 16,384 GPUs
        self._dist: dict[tuple[bool, int], np.ndarray] = {}
        #: splits by (src, dst), per-device inflow kept as its nonzeros (a dense row per pair
        #: would be pairs x devices: ~20 GB at 16,384 GPUs)
        self._paths: dict[tuple[int, int], _CompactSplit] = {}
        self._out: dict[bool, tuple[np.ndarray, np.ndarray]] = {}
        self._marks: np.ndarray | None = None  # scratch of :meth:`_shortest_dag`
        self._torus = topology if isinstance(topology, TorusTopology) and topology.dims else None
        #: routes follow the torus's dimension order (not only the fabric's shape)
        self.dimension_ordered = self._torus is not None
        #: device pairs whose split the ECMP cap pruned (ties broken by channel id)
        self.capped: set[tuple[int, int]] = set()

    def _calibrate(self, topology: Topology, channels: tuple[Channel, ...]) -> None:
        """A profile's link and NIC efficiencies replace the catalog's payload fraction of every
        scale-up (class 1) and network (class 3) channel (:mod:`scaleup.topology.model_profile`)."""
        cal = topology.calibration
        if cal is None:
            return
        for cls, value in ((1, cal.link_efficiency), (3, cal.nic_efficiency)):
            if value is None:
                continue
            on = np.flatnonzero(self.ch_class == cls)
            raw = np.array([channels[i].bandwidth_bytes_per_s for i in on])
            self.ch_capacity[on] = raw * value

    # ---- distances -----------------------------------------------------------------------
    def prepare(self, devices: np.ndarray, graphs: tuple[bool, ...] = (False,)) -> None:
        """Compute BFS distances from many devices at once (one C call instead of many), in the
        graph without hosts (``graphs``: which of without / with hosts). The graph through hosts
        is asked for only where the first has no way. Without host devices both graphs are one:
        their distances are computed once."""
        hostless = not self.is_host.any()
        for with_hosts in graphs:
            need = [int(d) for d in unique(devices) if (with_hosts, int(d)) not in self._dist]
            if need and with_hosts and hostless:
                self.prepare(np.asarray(need), (False,))
                for d in need:
                    self._dist[(True, d)] = self._dist[(False, d)]
            else:
                for at in range(0, len(need), _BFS_BATCH):  # bounded float64 temporaries
                    batch = need[at : at + _BFS_BATCH]
                    dist = shortest_path(
                        self._graphs[with_hosts], unweighted=True, indices=batch, directed=True
                    )
                    finite = np.isfinite(dist)
                    if (dist[finite] >= UNREACHABLE).any():
                        raise NoRouteError(f"a route of {UNREACHABLE} hops or more")
                    hops = np.where(finite, dist, UNREACHABLE).astype(np.uint16)
                    for d, row in zip(batch, np.atleast_2d(hops), strict=True):
                        self._dist[(with_hosts, d)] = row.copy()  # not a view of the batch

    def distance(self, with_hosts: bool, device: int) -> np.ndarray:
        """Hop counts from ``device`` to every device (through hosts or not; inf where there is
        no way), cached."""
        row = self._hops(with_hosts, device)
        return np.where(row == UNREACHABLE, np.inf, row.astype(np.float64))

    def _hops(self, with_hosts: bool, device: int) -> np.ndarray:
        """:meth:`distance` as stored: uint16, UNREACHABLE where there is no way."""
        key = (with_hosts, device)
        if key not in self._dist:
            self.prepare(np.array([device]), (with_hosts,))
        return self._dist[key]

    # ---- paths ---------------------------------------------------------------------------
    def path(self, src: int, dst: int) -> PathSplit:
        """Multipath split from device ``src`` to ``dst``: (channel ids, fractions, per-device
        inflow, latency_s, link class). Hosts are crossed only if there is no other way."""
        key = (src, dst)
        cached = self._paths.get(key)
        if cached is None:
            if self._torus is not None:  # devices are the ranks, in rank order
                cached = self._dor_path(self._torus, src, dst)
            else:
                cached = self._split(src, dst)
            self._paths[key] = cached
        edges, frac, nodes, flow, latency, link_class = cached
        inflow = np.zeros(self.n_devices)
        inflow[nodes] = flow
        return edges, frac, inflow, latency, link_class

    def _split(self, src: int, dst: int) -> _CompactSplit:
        """:meth:`path` computed: every shortest path, bytes split by capacity at each hop."""
        for with_hosts in (False, True):
            dag = self._shortest_dag(with_hosts, src, dst)
            if dag is not None:
                break
        else:
            raise NoRouteError(
                f"no path from {self.topology.devices[src].id} to {self.topology.devices[dst].id}"
            )
        hops, edges, level = self._preferred_paths(*dag, src, dst)
        u, v = self.ch_src, self.ch_dst
        # the devices on these paths, numbered locally: a pair's work follows its paths, not
        # the fabric (per-device arrays of the whole fabric made routing quadratic in GPUs)
        nodes, local = np.unique(np.r_[[src, dst], u[edges], v[edges]], return_inverse=True)
        at_src, at_dst = local[0], local[1]
        lu, lv_ = local[2 : 2 + len(edges)], local[2 + len(edges) :]
        n_local = len(nodes)
        inflow = np.zeros(n_local)
        inflow[at_src] = 1.0
        arrive = np.zeros(n_local)
        frac = np.zeros(len(edges))
        for lv in range(hops):
            sel = np.flatnonzero(level == lv)
            e = edges[sel]
            w = self.ch_capacity[e].copy()
            eu, ev = lu[sel], lv_[sel]
            counts = np.bincount(eu, minlength=n_local)
            if counts.max() > P.MAX_ECMP_FANOUT:
                w = _cap_fanout(eu, w, e)
                self.capped.add((src, dst))
            wsum = np.bincount(eu, weights=w, minlength=n_local)
            f = np.where(w > 0, inflow[eu] * w / np.where(wsum[eu] > 0, wsum[eu], 1.0), 0.0)
            frac[sel] = f
            inflow += np.bincount(ev, weights=f, minlength=n_local)
            through = (
                arrive[eu] + self.ch_latency[e] + np.where(v[e] == dst, 0.0, self.dev_latency[v[e]])
            )
            np.maximum.at(arrive, ev, np.where(f > 0, through, 0.0))
        keep = frac > 0
        edges, frac = edges[keep], frac[keep]
        link_class = int(self.ch_class[edges].max()) if len(edges) else 0
        inflow[at_src] = 0.0
        inflow[at_dst] = 0.0
        through = inflow != 0.0
        return edges, frac, nodes[through], inflow[through], float(arrive[at_dst]), link_class

    def _preferred_paths(
        self, hops: int, edges: np.ndarray, level: np.ndarray, src: int, dst: int
    ) -> tuple[int, np.ndarray, np.ndarray]:
        """Of the shortest paths, those a transfer really takes, where any of them is one;
        else all.

        Between servers, the paths that relay through no accelerator: a transfer that leaves
        its server goes out through the source's own NIC and the network's switches, never
        through a peer GPU's memory and that GPU's NIC (NCCL's net transport takes one NIC per
        rank and channel from the channel's graph, src/transport/net.cc line 310
        ncclTopoGetNetDev; PXN's detour through a peer GPU is a path type NCCL chooses,
        src/graph/paths.cc addInterStep line 225, not a tie of routes). Where the network
        offers a path of the same hop count through another GPU (a leaf shared with a peer's
        NIC), that path would store and forward in the peer's HBM and load the peer's NIC,
        which carries its own channel.

        Inside a server, the paths that stay off the network: a mesh pair without a direct
        link (DGX-1's 0-5) and a chip torus relay through accelerators, and a tie with a way
        out through a NIC and back (two Trainium2 nodes: chips four torus hops apart) sends
        none of the bytes over the network, which the libraries use only between servers."""
        if not len(edges):
            return hops, edges, level
        tail, head = self.ch_src[edges], self.ch_dst[edges]
        if self.dev_node[src] == self.dev_node[dst]:
            drop = self.ch_class[edges] == _NETWORK_CLASS
        else:
            drop = (self.is_acc[tail] & (tail != src)) | (self.is_acc[head] & (head != dst))
        if not drop.any():
            return hops, edges, level
        keep = ~drop
        reach = np.zeros(self.n_devices, dtype=bool)  # forward from src through kept channels
        reach[src] = True
        for k in range(hops):
            on_k = level == k
            at = keep & on_k
            at[at] = reach[tail[at]]
            keep[on_k & ~at] = False
            reach[head[at]] = True
        back = np.zeros(self.n_devices, dtype=bool)  # backward from dst through kept channels
        back[dst] = True
        for k in range(hops - 1, -1, -1):
            on_k = level == k
            at = keep & on_k
            at[at] = back[head[at]]
            keep[on_k & ~at] = False
            back[tail[at]] = True
        if not keep.any():
            return hops, edges, level
        return hops, edges[keep], level[keep]

    def _shortest_dag(
        self, with_hosts: bool, src: int, dst: int
    ) -> tuple[int, np.ndarray, np.ndarray] | None:
        """``(hops, channels, level)``: the channels on a shortest path from ``src`` to ``dst`` (in
        the graph with or without hosts), in id order, each with its tail's distance from
        ``src``; None when there is no way.

        A bidirectional breadth-first search over the devices' out-channels (channels come in
        pairs: the graph is symmetric, so a device's out-neighbours are its in-neighbours too),
        whole layers from the smaller side until the two sides meet, so a pair costs the balls
        around its ends, not the fabric (a search from every rank over the whole fabric was
        quadratic in GPUs). The layers where they meet hold the devices with ``ds + dd = hops``;
        walking both sides' layers back from there keeps exactly the devices on shortest paths,
        and the channels between consecutive ones are those paths' channels."""
        ptr, out = self.out_channels(with_hosts)
        ch_dst = self.ch_dst
        df, db, on_level, stamp = self._scratch()  # -1 everywhere between calls (not stamp)

        def around(devices: np.ndarray) -> np.ndarray:
            """The devices one channel from ``devices``, each once (in no particular order:
            the channels found are sorted at the end)."""
            near = ch_dst[out[csr_rows(ptr, devices)]]
            at = np.arange(len(near))
            stamp[near] = at  # the last position of each device wins
            return near[stamp[near] == at]

        fwd, bwd = [np.array([src], dtype=np.int64)], [np.array([dst], dtype=np.int64)]
        df[src], db[dst] = 0, 0
        meet = fwd[0] if src == dst else np.zeros(0, dtype=np.int64)
        try:
            while not len(meet):  # grow the smaller frontier by one layer
                forward = len(fwd[-1]) <= len(bwd[-1])
                layers, mine, theirs = (fwd, df, db) if forward else (bwd, db, df)
                layer = around(layers[-1])
                layer = layer[mine[layer] < 0]
                if not len(layer):
                    return None
                mine[layer] = len(layers)
                layers.append(layer)
                meet = layer[theirs[layer] >= 0]
            # devices on shortest paths, by distance from src: back from the meeting layer
            i, j = len(fwd) - 1, len(bwd) - 1
            hops = i + j
            on = [meet] * (hops + 1)
            for k in range(i - 1, -1, -1):
                near = around(on[k + 1])
                on[k] = near[df[near] == k]
            for k in range(j - 1, -1, -1):
                near = around(on[hops - k - 1])
                on[hops - k] = near[db[near] == k]
            for k, devices in enumerate(on):
                on_level[devices] = k
            found, levels = [], []
            for k in range(hops):
                ch = out[csr_rows(ptr, on[k])]
                ch = ch[on_level[ch_dst[ch]] == k + 1]
                found.append(ch)
                levels.append(np.full(len(ch), k, dtype=np.int64))
        finally:
            for layer in fwd:
                df[layer] = -1
            for layer in bwd:
                db[layer] = -1
            on_level[np.concatenate(fwd + bwd)] = -1
        if not found:
            return 0, np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
        edges = np.concatenate(found)
        order = np.argsort(edges, kind="stable")
        return hops, edges[order], np.concatenate(levels)[order]

    def _scratch(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Four per-device int arrays: three -1 everywhere (each search resets what it
        touched), and one that each use writes before it reads."""
        if self._marks is None:
            self._marks = np.full((4, self.n_devices), -1, dtype=np.int64)
        return self._marks[0], self._marks[1], self._marks[2], self._marks[3]

    def out_channels(self, with_hosts: bool) -> tuple[np.ndarray, np.ndarray]:
        """Each device's out-channels (CSR: pointer, channel ids), in the graph with or without
        hosts, built once."""
        if with_hosts not in self._out:
            keep = np.ones(self.n_channels, dtype=bool)
            if not with_hosts:
                keep &= ~(self.is_host[self.ch_src] | self.is_host[self.ch_dst])
            ids = np.flatnonzero(keep)
            ids = ids[np.argsort(self.ch_src[ids], kind="stable")]
            ptr = np.concatenate(
                [[0], np.cumsum(np.bincount(self.ch_src[ids], minlength=self.n_devices))]
            )
            self._out[with_hosts] = (ptr.astype(np.int64), ids.astype(np.int64))
        return self._out[with_hosts]

    def _dor_path(self, t: TorusTopology, src: int, dst: int) -> _CompactSplit:
        """The one dimension-order route of a torus (:func:`~scaleup.topology.torus.dor_route`):
        every byte on it, each chip on the way storing and forwarding."""
        route = dor_route(t, src, dst)
        index = t.channel_index
        ids = [d.id for d in t.devices]
        edges = np.array(
            [index[(ids[a], ids[b])] for a, b in zip(route, route[1:], strict=False)],
            dtype=np.int64,
        )
        middle = unique(np.asarray(route[1:-1], dtype=np.int64))
        latency = float(self.ch_latency[edges].sum() + self.dev_latency[route[1:-1]].sum())
        link_class = int(self.ch_class[edges].max()) if len(edges) else 0
        return edges, np.ones(len(edges)), middle, np.ones(len(middle)), latency, link_class


def _cap_fanout(eu: np.ndarray, w: np.ndarray, e: np.ndarray) -> np.ndarray:
    """Zero the weight of all but the MAX_ECMP_FANOUT widest next hops of each node."""
    order = np.lexsort((e, -w, eu))
    out = np.zeros_like(w)
    rank_in_group = np.zeros(len(e), dtype=np.int64)
    sorted_u = eu[order]
    starts = np.r_[0, np.flatnonzero(np.diff(sorted_u)) + 1]
    rank_in_group[order] = np.arange(len(e)) - np.repeat(starts, np.diff(np.r_[starts, len(e)]))
    keep = rank_in_group < P.MAX_ECMP_FANOUT
    out[keep] = w[keep]
    return out
