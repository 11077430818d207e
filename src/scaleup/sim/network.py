"""Routes and constraints of a Topology, for the flow-level simulator.

A :class:`Network` turns a :class:`~scaleup.topology.model.Topology` into LMM *constraints*
(every directed channel at its achievable payload rate, every accelerator's HBM, every host's
memory) and *routes*: for one transfer, the fraction of its bytes on each constraint, plus its
hardware latency. Routes are cached per key inside the network, which its owner keeps for as
long as it times schedules on that topology (a tuning session, or one ``simulate`` call): there is
no module-level cache.

Routing rules:

- **Shortest paths by hop count.** Peer traffic avoids host devices when it can (NVLink/xGMI
  fabrics never detour through a CPU); where it cannot (``pcie-8``), P2P crosses the PCIe switch,
  the root complex and the socket link.
- **Multipath.** Where several shortest paths exist the bytes split at every hop over the next
  hops on a shortest path, in proportion to their channel bandwidth (NVLink sprays over all its
  links; switches spread over equal uplinks). At most :data:`~scaleup.sim.params.MAX_ECMP_FANOUT`
  next hops per node. One route is one LMM variable (see :mod:`scaleup.sim.fairshare`).
- **Meshes.** A pair without a direct link (DGX-1 0-5) routes through intermediate
  accelerators, which store and forward (HBM write + read).
- **Host-staged (degraded).** With ``peer_access`` off, a transfer is a device->host copy into
  the source's nearest host memory and a host->device copy out of it, pipelined: it crosses both
  paths and the host memory twice. A topology without host devices gets virtual hosts
  (:data:`~scaleup.sim.params.VIRTUAL_HOST_SOCKETS` per server) joined by each accelerator's
  catalog host link.
- **Switch reduction (NVLS).** See :meth:`Network.switch_route`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy.sparse import csr_matrix
from scipy.sparse.csgraph import shortest_path

from scaleup import hardware
from scaleup.errors import NoRouteError, SimulationError
from scaleup.sim import params as P
from scaleup.topology.model import NodeKind, Topology

__all__ = ["CONSTRAINT_KINDS", "LINK_CLASSES", "Network", "Route"]

#: Kinds of constraint, in the order they are laid out.
CONSTRAINT_KINDS = ("channel", "host_link", "hbm", "host_memory")
#: Latency classes of a route (rows of params.STEP_LATENCY_S, plus "switch").
LINK_CLASSES = ("local", "nvlink", "pci", "net", "switch")
_CLASS_OF_FAMILY = {"nvlink": 1, "xgmi": 1, "ualink": 1, "c2c": 1, "pcie": 2, "socket": 2,
                    "infiniband": 3, "ethernet": 3}  # fmt: skip


@dataclass(frozen=True)
class Route:
    """Fractions of a transfer's bytes on each constraint, and its hardware latency.

    ``net_*`` are fabric constraints (channels, host links: scaled by the protocol's payload
    efficiency), ``mem_*`` memory constraints (HBM, host memory: accesses per byte).
    ``inflate`` multiplies the fabric coefficients when sharing capacity (switch reductions:
    1/NVLS efficiency) but not the bytes counted as carried.
    """

    net_rows: np.ndarray
    net_vals: np.ndarray
    mem_rows: np.ndarray
    mem_vals: np.ndarray
    latency_s: float
    link_class: int
    inflate: float = 1.0


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


def _merge(rows: list[np.ndarray], vals: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    if not rows:
        return np.zeros(0, dtype=np.int64), np.zeros(0)
    r = np.concatenate(rows).astype(np.int64)
    v = np.concatenate(vals).astype(np.float64)
    uniq, inv = np.unique(r, return_inverse=True)
    return uniq, np.bincount(inv, weights=v, minlength=len(uniq))


class Network:
    """Constraints and cached routes of one topology.

    Routes are added as schedules are compiled on it and never change once added; the route ids
    a schedule gets depend on what was compiled before, which is why
    :class:`~scaleup.sim.simulate.CompiledSchedule` orders its variables by a key of its own.
    """

    def __init__(self, topology: Topology) -> None:
        t = self.topology = topology
        dev_index = {d.id: i for i, d in enumerate(t.devices)}
        self.n_devices = len(t.devices)
        kinds = [d.kind for d in t.devices]
        self.is_host = np.array([k is NodeKind.HOST for k in kinds])
        self.is_acc = np.array([k is NodeKind.ACCELERATOR for k in kinds])
        self.acc_devices = np.array([dev_index[d.id] for d in t.accelerators], dtype=np.int64)
        self.rank_of_device = {int(d): r for r, d in enumerate(self.acc_devices)}
        self.dev_latency = np.array([t.device_latency_s(d.id) for d in t.devices])
        channels = t.channels
        self.n_channels = len(channels)
        self.ch_src = np.array([dev_index[c.src] for c in channels], dtype=np.int64)
        self.ch_dst = np.array([dev_index[c.dst] for c in channels], dtype=np.int64)
        self.ch_latency = np.array([c.latency_s for c in channels])
        self.ch_class = np.array([_CLASS_OF_FAMILY.get(str(hardware.link_tech(c.tech).family), 1)
                                  for c in channels], dtype=np.int64)  # fmt: skip
        eff = {tech: link_efficiency(tech) for tech in {c.tech for c in channels}}
        ch_cap = np.array([c.bandwidth_bytes_per_s * eff[c.tech] for c in channels])
        self.ch_capacity = ch_cap
        names = [f"{c.src}->{c.dst}" for c in channels]
        caps = [ch_cap]
        kinds_out = [np.zeros(self.n_channels, dtype=np.int8)]
        # virtual hosts when the topology has none
        n_acc = len(self.acc_devices)
        accs = t.accelerators
        self.virtual_hosts = not self.is_host.any()
        base = self.n_channels
        if self.virtual_hosts:
            links = [hardware.accelerator(a.type).host_link for a in accs]
            cap = np.array([lk.bandwidth_bytes_per_s * link_efficiency(lk.name) for lk in links])
            self.vlink_latency = np.array([lk.latency_s for lk in links])
            self.vup = base + 2 * np.arange(n_acc)
            self.vdown = self.vup + 1
            caps.append(np.repeat(cap, 2))
            names += [f"{a.id}<->vhost.{s}" for a in accs for s in ("up", "down")]
            kinds_out.append(np.ones(2 * n_acc, dtype=np.int8))
            base += 2 * n_acc
        self.hbm = base + np.arange(n_acc)
        caps.append(
            np.array(
                [hardware.accelerator(a.type).hbm_bytes_per_s * P.HBM_EFFICIENCY for a in accs]
            )
        )
        names += [f"{a.id}.hbm" for a in accs]
        kinds_out.append(np.full(n_acc, 2, dtype=np.int8))
        base += n_acc
        host_spec = hardware.host_spec("host")
        if self.virtual_hosts:
            nodes = sorted({a.node for a in accs})
            per_node: dict[int, list[int]] = {}
            for r, a in enumerate(accs):
                per_node.setdefault(a.node, []).append(r)
            self.vhost_of_rank = np.zeros(n_acc, dtype=np.int64)
            k = 0
            for node in nodes:
                members = per_node[node]
                for i, r in enumerate(members):
                    self.vhost_of_rank[r] = k + i * P.VIRTUAL_HOST_SOCKETS // len(members)
                k += P.VIRTUAL_HOST_SOCKETS
            n_hosts = k
            host_caps = np.full(n_hosts, host_spec.memory_bytes_per_s * P.HOST_MEMORY_EFFICIENCY)
            names += [f"vhost{i}.memory" for i in range(n_hosts)]
            self.host_latency = float(host_spec.latency_s)
        else:
            host_devs = np.flatnonzero(self.is_host)
            host_caps = np.array([hardware.host_spec(t.devices[h].type).memory_bytes_per_s
                                  * P.HOST_MEMORY_EFFICIENCY for h in host_devs])  # fmt: skip
            names += [f"{t.devices[h].id}.memory" for h in host_devs]
            n_hosts = len(host_devs)
        self.host_mem = base + np.arange(n_hosts)
        self.host_mem_of_device = {
            int(h): int(self.host_mem[i]) for i, h in enumerate(np.flatnonzero(self.is_host))
        }
        caps.append(host_caps)
        kinds_out.append(np.full(n_hosts, 3, dtype=np.int8))
        self.capacity = np.concatenate(caps)
        self.constraint_kind = np.concatenate(kinds_out)
        self.constraint_names = tuple(names)
        self.n_constraints = len(self.capacity)
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
        self._dist: dict[tuple[bool, int], np.ndarray] = {}
        self._paths: dict[
            tuple[int, int], tuple[np.ndarray, np.ndarray, np.ndarray, float, int]
        ] = {}
        self.routes: list[Route] = []
        self._route_ids: dict[Any, int] = {}

    # ---- distances -----------------------------------------------------------------------
    def prepare(self, devices: np.ndarray) -> None:
        """Compute BFS distances from many devices at once (one C call instead of many)."""
        for with_hosts in (False, True):
            need = [int(d) for d in np.unique(devices) if (with_hosts, int(d)) not in self._dist]
            if need:
                dist = shortest_path(
                    self._graphs[with_hosts], unweighted=True, indices=need, directed=True
                )
                for d, row in zip(need, np.atleast_2d(dist), strict=True):
                    self._dist[(with_hosts, d)] = row

    def _distance(self, with_hosts: bool, device: int) -> np.ndarray:
        key = (with_hosts, device)
        if key not in self._dist:
            self.prepare(np.array([device]))
        return self._dist[key]

    # ---- paths ---------------------------------------------------------------------------
    def path(self, src: int, dst: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, float, int]:
        """Multipath split from device ``src`` to ``dst``: (channel ids, fractions, per-device
        inflow, latency_s, link class). Hosts are crossed only if there is no other way."""
        key = (src, dst)
        cached = self._paths.get(key)
        if cached is not None:
            return cached
        for with_hosts in (False, True):
            ds = self._distance(with_hosts, src)
            dd = self._distance(with_hosts, dst)  # channels come in pairs: the graph is symmetric
            hops = ds[dst]
            if np.isfinite(hops):
                break
        else:
            raise NoRouteError(
                f"no path from {self.topology.devices[src].id} to {self.topology.devices[dst].id}"
            )
        u, v = self.ch_src, self.ch_dst
        on = ds[u] + 1 + dd[v] == hops
        if not with_hosts:
            on &= ~(self.is_host[u] | self.is_host[v])
        edges = np.flatnonzero(on)
        inflow = np.zeros(self.n_devices)
        inflow[src] = 1.0
        arrive = np.zeros(self.n_devices)
        frac = np.zeros(len(edges))
        level = ds[u[edges]]
        for lv in range(int(hops)):
            sel = np.flatnonzero(level == lv)
            e = edges[sel]
            w = self.ch_capacity[e].copy()
            eu = u[e]
            counts = np.bincount(eu, minlength=self.n_devices)
            if counts.max() > P.MAX_ECMP_FANOUT:
                w = _cap_fanout(eu, w, e)
            wsum = np.bincount(eu, weights=w, minlength=self.n_devices)
            f = np.where(w > 0, inflow[eu] * w / np.where(wsum[eu] > 0, wsum[eu], 1.0), 0.0)
            frac[sel] = f
            inflow += np.bincount(v[e], weights=f, minlength=self.n_devices)
            through = (
                arrive[eu] + self.ch_latency[e] + np.where(v[e] == dst, 0.0, self.dev_latency[v[e]])
            )
            np.maximum.at(arrive, v[e], np.where(f > 0, through, 0.0))
        keep = frac > 0
        edges, frac = edges[keep], frac[keep]
        link_class = int(self.ch_class[edges].max()) if len(edges) else 0
        inflow[src] = 0.0
        inflow[dst] = 0.0
        result = (edges, frac, inflow, float(arrive[dst]), link_class)
        self._paths[key] = result
        return result

    # ---- routes --------------------------------------------------------------------------
    def _add(self, key: Any, route: Route) -> int:
        self._route_ids[key] = len(self.routes)
        self.routes.append(route)
        return len(self.routes) - 1

    def transfer_route(self, src_rank: int, dst_rank: int, *, reduce: bool = False) -> int:
        """Route id of a copy (or, with ``reduce``, a reduction at the destination) between two
        accelerators given by rank; local when they are equal; host-staged without peer access."""
        key = ("t", src_rank, dst_rank, reduce)
        rid = self._route_ids.get(key)
        if rid is not None:
            return rid
        dst_access = P.REDUCE_HBM_ACCESSES if reduce else 1.0
        if src_rank == dst_rank:
            local = P.REDUCE_HBM_ACCESSES if reduce else P.LOCAL_COPY_HBM_ACCESSES
            empty = np.zeros(0, dtype=np.int64)
            route = Route(
                empty, np.zeros(0), np.array([self.hbm[src_rank]]), np.array([local]), 0.0, 0
            )
            return self._add(key, route)
        if not self.topology.peer_access:
            return self._add(key, self._staged(src_rank, dst_rank, dst_access))
        s, d = int(self.acc_devices[src_rank]), int(self.acc_devices[dst_rank])
        edges, frac, inflow, latency, link_class = self.path(s, d)
        fwd = np.flatnonzero((inflow > 0) & self.is_acc)
        mem_rows = [np.array([self.hbm[src_rank], self.hbm[dst_rank]])]
        mem_vals = [np.array([1.0, dst_access])]
        if len(fwd):
            mem_rows.append(self.hbm[[self.rank_of_device[int(x)] for x in fwd]])
            mem_vals.append(P.FORWARD_HBM_ACCESSES * inflow[fwd])
        rows, vals = _merge(mem_rows, mem_vals)
        return self._add(key, Route(edges, frac, rows, vals, latency, link_class))

    def _staged(self, src_rank: int, dst_rank: int, dst_access: float) -> Route:
        """device -> host memory -> device, pipelined (one variable over both legs)."""
        mem_rows = [np.array([self.hbm[src_rank], self.hbm[dst_rank]])]
        mem_vals = [np.array([1.0, dst_access])]
        if self.virtual_hosts:
            net_rows, net_vals = (
                np.array([self.vup[src_rank], self.vdown[dst_rank]]),
                np.array([1.0, 1.0]),
            )
            mem_rows.append(np.array([self.host_mem[self.vhost_of_rank[src_rank]]]))
            latency = float(
                self.vlink_latency[src_rank] + self.host_latency + self.vlink_latency[dst_rank]
            )
        else:
            s, d = int(self.acc_devices[src_rank]), int(self.acc_devices[dst_rank])
            ds = self._distance(True, s)
            hosts = np.flatnonzero(self.is_host)
            host = int(hosts[np.argmin(ds[hosts])])
            e1, f1, _, l1, _ = self.path(s, host)
            e2, f2, _, l2, _ = self.path(host, d)
            net_rows, net_vals = _merge([e1, e2], [f1, f2])
            mem_rows.append(np.array([self.host_mem_of_device[host]]))
            latency = l1 + float(self.dev_latency[host]) + l2
        mem_vals.append(np.array([P.HOST_STAGED_ACCESSES]))
        rows, vals = _merge(mem_rows, mem_vals)
        return Route(net_rows, net_vals, rows, vals, latency + P.HOST_STAGING_LATENCY_S, 2)

    def switch_route(self, srcs: tuple[int, ...], dsts: tuple[int, ...], issuer: int) -> int:
        """Route id of an in-switch reduction (ranks): every source's chunk goes up to the switch
        planes of the issuer, is reduced there, returns to the issuer (multimem.ld_reduce) and is
        multicast from it to every destination (multimem.st); see
        :data:`~scaleup.sim.params.NVLS_RESULT_VIA_ISSUER`. Bytes split over the planes in
        proportion to the issuer's links; every link byte costs 1/``NVLS_EFFICIENCY``."""
        key = ("s", srcs, dsts, issuer)
        rid = self._route_ids.get(key)
        if rid is not None:
            return rid
        t = self.topology
        ranks = sorted({*srcs, *dsts, issuer})
        dev = {r: int(self.acc_devices[r]) for r in ranks}
        out = np.flatnonzero(self.ch_src == dev[issuer])
        targets = [(int(c), t.devices[int(self.ch_dst[c])]) for c in out]
        planes = [
            c
            for c, device in targets
            if device.kind is NodeKind.SWITCH
            and hardware.switch_chip(device.type).in_switch_reduction
        ]
        if not planes:
            raise SimulationError("nvls needs a switch with in-switch reduction", rank=issuer)
        switches = [int(self.ch_dst[c]) for c in planes]
        share = self.ch_capacity[planes] / self.ch_capacity[planes].sum()
        index = self.topology.channel_index
        arch = str(hardware.accelerator(t.devices[dev[issuer]].type).arch)
        inflate = 1.0 / P.NVLS_EFFICIENCY.get(
            P.ARCH_ALIASES.get(arch, "default"), P.NVLS_EFFICIENCY["default"]
        )
        rows: list[int] = []
        vals: list[float] = []
        latency = 0.0

        def leg(a: int, b: int, f: float) -> float:
            ids = t.devices
            c = index.get((ids[a].id, ids[b].id))
            if c is None:
                raise SimulationError(
                    f"nvls needs {ids[a].id} and {ids[b].id} directly linked (one switch tier)",
                    entry=ids[a].id,
                )
            rows.append(c)
            vals.append(f)
            return float(self.ch_latency[c])

        reduction = srcs != (issuer,)
        multicast = dsts != (issuer,)
        for sw, f in zip(switches, share, strict=True):
            sw_lat = float(self.dev_latency[sw])
            lat = 0.0
            if reduction:  # every source's chunk goes up to the plane, reduced there
                lat = max(leg(dev[r], sw, f) for r in srcs) + sw_lat
                if P.NVLS_RESULT_VIA_ISSUER or not multicast:  # ld_reduce: result to the issuer
                    lat += leg(sw, dev[issuer], f)
                    if multicast:  # then multimem.st from the issuer
                        lat += leg(dev[issuer], sw, f) + sw_lat
            elif multicast:  # pure multicast: the issuer's chunk goes up once
                lat = leg(dev[issuer], sw, f) + sw_lat
            if multicast:
                lat += max(leg(sw, dev[r], f) for r in dsts)
            latency = max(latency, lat)
        net_rows, net_vals = _merge([np.array(rows, dtype=np.int64)], [np.array(vals)])
        mem_rows, mem_vals = _merge([self.hbm[list(srcs)], self.hbm[list(dsts)]],
                                    [np.ones(len(srcs)), np.ones(len(dsts))])  # fmt: skip
        return self._add(key, Route(net_rows, net_vals, mem_rows, mem_vals, latency, 4, inflate))


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
