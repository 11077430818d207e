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
  accelerators, which store and forward (HBM write + read). Between servers, where a shortest
  path avoids every accelerator, the paths that relay through one are dropped (a transfer
  leaves through its own NIC, not a peer GPU's); inside a server, where one avoids the
  network, the paths out through a NIC and back are dropped.
- **Host-staged (degraded).** With ``peer_access`` off, a transfer is a device->host copy into
  the source's nearest host memory and a host->device copy out of it, pipelined: it crosses both
  paths and the host memory twice. A topology without host devices gets virtual hosts
  (:data:`~scaleup.sim.params.VIRTUAL_HOST_SOCKETS` per server) joined by each accelerator's
  catalog host link.
- **Switch reduction (NVLS).** See :meth:`Network.switch_route`.

The device and channel arrays and the multipath split live in :mod:`~scaleup.sim.paths`.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Any

import numpy as np

from scaleup import hardware
from scaleup.errors import SimulationError
from scaleup.sim import params as P
from scaleup.sim.paths import FabricPaths, PathSplit, link_efficiency
from scaleup.topology.model import Device, NodeKind, Topology

__all__ = ["CONSTRAINT_KINDS", "LINK_CLASSES", "Network", "Route", "link_efficiency"]

#: Kinds of constraint, in the order they are laid out.
CONSTRAINT_KINDS = ("channel", "host_link", "hbm", "host_memory")
#: Latency classes of a route (rows of params.STEP_LATENCY_S, plus "switch").
LINK_CLASSES = ("local", "nvlink", "pci", "net", "switch")


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
        fabric = self.fabric = FabricPaths(topology)
        self.n_devices, self.is_host, self.is_acc = fabric.n_devices, fabric.is_host, fabric.is_acc
        self.acc_devices = fabric.acc_devices
        self.rank_of_device = {int(d): r for r, d in enumerate(self.acc_devices)}
        self.dev_latency = fabric.dev_latency
        self.n_channels, self.ch_src, self.ch_dst = fabric.n_channels, fabric.ch_src, fabric.ch_dst
        self.ch_latency, self.ch_class = fabric.ch_latency, fabric.ch_class
        self.ch_capacity = fabric.ch_capacity
        names = [f"{c.src}->{c.dst}" for c in t.channels]
        caps = [self.ch_capacity]
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
        host_caps = self._host_memories(accs, names)
        n_hosts = len(host_caps)
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
        self.routes: list[Route] = []
        self._route_ids: dict[Any, int] = {}
        self._planes_of: dict[int, tuple[list[int], np.ndarray]] = {}
        #: the channels between a plane and a set of devices (each way) and the slowest one's
        #: latency, by (plane, devices, up): a server's NVLS ops share their sources' legs
        self._legs_of: dict[tuple[int, tuple[int, ...], bool], tuple[np.ndarray, float]] = {}

    def _host_memories(self, accs: tuple[Device, ...], names: list[str]) -> np.ndarray:
        """Capacity of every host memory constraint (virtual hosts: ``VIRTUAL_HOST_SOCKETS``
        per server, each rank on one); their names are appended to ``names``."""
        t = self.topology
        host_spec = hardware.host_spec("host")
        if self.virtual_hosts:
            n_acc = len(accs)
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
        return host_caps

    # ---- distances and paths (:class:`~scaleup.sim.paths.FabricPaths`) --------------------
    @cached_property
    def device_type_code(self) -> np.ndarray:
        """Each device's kind and catalog type as one small int (equal codes: the same part)."""
        names = [f"{d.kind}:{d.type}" for d in self.topology.devices]
        return np.unique(np.array(names, dtype=object), return_inverse=True)[1].astype(np.int64)

    @cached_property
    def out_neighbours(self) -> dict[int, frozenset[int]]:
        """Device -> the devices its channels lead to (built once: symmetry searches ask for
        it per candidate permutation, and the channels never change)."""
        nbrs: dict[int, set[int]] = {}
        for a, b in zip(self.ch_src.tolist(), self.ch_dst.tolist(), strict=True):
            nbrs.setdefault(a, set()).add(b)
        return {a: frozenset(b) for a, b in nbrs.items()}

    def path(self, src: int, dst: int) -> PathSplit:
        """Multipath split from device ``src`` to ``dst``: (channel ids, fractions, per-device
        inflow, latency_s, link class). Hosts are crossed only if there is no other way."""
        return self.fabric.path(src, dst)

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

    def carry_transfer_route(
        self, rid: int, con_image: np.ndarray, src_rank: int, dst_rank: int, *, reduce: bool
    ) -> int | None:
        """Add the route of a transfer as the image of route ``rid`` under ``con_image`` (the
        constraint map of an automorphism of the fabric that carries ``rid``'s transfer onto this
        one: the caller's proof, :func:`scaleup.sim.route_symmetry.carry_routes`); its id, or
        None where the map leaves one of the route's constraints without an image."""
        key = ("t", src_rank, dst_rank, reduce)
        known = self._route_ids.get(key)
        if known is not None:
            return known
        base = self.routes[rid]
        net_rows, mem_rows = con_image[base.net_rows], con_image[base.mem_rows]
        if (net_rows < 0).any() or (mem_rows < 0).any():
            return None
        net_order, mem_order = np.argsort(net_rows), np.argsort(mem_rows)  # rows kept sorted
        route = Route(
            net_rows[net_order], base.net_vals[net_order], mem_rows[mem_order],
            base.mem_vals[mem_order], base.latency_s, base.link_class, base.inflate,
        )  # fmt: skip
        return self._add(key, route)

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
            ds = self.fabric.distance(True, s)
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
        return self._add(key, self._switch(srcs, dsts, issuer))

    def _planes(self, issuer: int, issuer_device: int) -> tuple[list[int], np.ndarray]:
        """The switches (device ids) with in-switch reduction the issuer's channels reach, and
        the share of the bytes each takes (in proportion to the issuer's channel capacity);
        cached per issuer (each issues several reductions)."""
        hit = self._planes_of.get(issuer)
        if hit is None:
            hit = self._planes_of[issuer] = self._find_planes(issuer, issuer_device)
        return hit

    def _find_planes(self, issuer: int, issuer_device: int) -> tuple[list[int], np.ndarray]:
        """:meth:`_planes`, computed: the issuer's out-channels in id order."""
        t = self.topology
        ptr, ids = self.fabric.out_channels(True)
        out = ids[ptr[issuer_device] : ptr[issuer_device + 1]]
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
        return switches, self.ch_capacity[planes] / self.ch_capacity[planes].sum()

    def _switch(self, srcs: tuple[int, ...], dsts: tuple[int, ...], issuer: int) -> Route:
        """The route :meth:`switch_route` adds: its legs over every plane, latency the slowest."""
        t = self.topology
        acc = self.acc_devices
        me = int(acc[issuer])
        switches, share = self._planes(issuer, me)
        arch = str(hardware.accelerator(t.devices[me].type).arch)
        inflate = 1.0 / P.NVLS_EFFICIENCY.get(
            P.ARCH_ALIASES.get(arch, "default"), P.NVLS_EFFICIENCY["default"]
        )
        src_devs = tuple(int(acc[r]) for r in srcs)
        dst_devs = tuple(int(acc[r]) for r in dsts)
        rows: list[np.ndarray] = []
        vals: list[np.ndarray] = []
        latency = 0.0
        reduction = srcs != (issuer,)
        multicast = dsts != (issuer,)
        for sw, f in zip(switches, share, strict=True):
            sw_lat = float(self.dev_latency[sw])
            legs: list[tuple[np.ndarray, float]] = []  # in the order their bytes are added
            lat = 0.0
            if reduction:  # every source's chunk goes up to the plane, reduced there
                legs.append(self._legs(sw, src_devs, up=True))
                lat = legs[-1][1] + sw_lat
                if P.NVLS_RESULT_VIA_ISSUER or not multicast:  # ld_reduce: result to the issuer
                    legs.append(self._legs(sw, (me,), up=False))
                    lat += legs[-1][1]
                    if multicast:  # then multimem.st from the issuer
                        legs.append(self._legs(sw, (me,), up=True))
                        lat += legs[-1][1] + sw_lat
            elif multicast:  # pure multicast: the issuer's chunk goes up once
                legs.append(self._legs(sw, (me,), up=True))
                lat = legs[-1][1] + sw_lat
            if multicast:
                legs.append(self._legs(sw, dst_devs, up=False))
                lat += legs[-1][1]
            for channels, _ in legs:
                rows.append(channels)
                vals.append(np.full(len(channels), f))
            latency = max(latency, lat)
        net_rows, net_vals = _merge(rows, vals)
        mem_rows, mem_vals = _merge([self.hbm[list(srcs)], self.hbm[list(dsts)]],
                                    [np.ones(len(srcs)), np.ones(len(dsts))])  # fmt: skip
        return Route(net_rows, net_vals, mem_rows, mem_vals, latency, 4, inflate)

    def _legs(self, plane: int, devices: tuple[int, ...], *, up: bool) -> tuple[np.ndarray, float]:
        """The channels from each of ``devices`` to switch ``plane`` (``up``) or back, and the
        slowest one's latency; a SimulationError where a device is not linked to it."""
        key = (plane, devices, up)
        hit = self._legs_of.get(key)
        if hit is None:
            ids, index = self.topology.devices, self.topology.channel_index
            found = []
            for d in devices:
                a, b = (d, plane) if up else (plane, d)
                c = index.get((ids[a].id, ids[b].id))
                if c is None:
                    raise SimulationError(
                        f"nvls needs {ids[a].id} and {ids[b].id} directly linked (one switch tier)",
                        entry=ids[a].id,
                    )
                found.append(c)
            channels = np.array(found, dtype=np.int64)
            hit = self._legs_of[key] = (channels, float(self.ch_latency[channels].max()))
        return hit
