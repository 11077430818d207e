"""Time a group's collective on the part of the fabric it can touch, once per class of groups.

A training job on a 16,384-GPU fabric issues its collectives over small groups: 8 TP ranks in one
server, a pipeline pair of two servers, 128 DP ranks one per server. The simulator and the tuner
(routes, channel search, flow symmetry) work on the whole topology they are given, so a group of
8 timed on 2,048 servers costs what 2,048 servers cost. :class:`GroupTimer` times it instead on
the group's **sub-fabric** (:func:`group_fabric`):

- the servers holding the group's ranks, whole (every accelerator, switch chip, host and NIC of
  them: the tuner lays channels through the whole server and picks NICs per channel);
- the scale-out switches on a shortest path between two leaves those servers reach, with the
  links among all of these, as they are.

**Why this is exact.** The simulator routes by hop count over every shortest path (ECMP over
the next hops on one); a group's flows run between its own accelerators, and the planner already
times each group alone (no other group's traffic on the fabric). Every device on a shortest path
between two of the group's servers is kept: inside the fabric, by construction; through another
server, never, because crossing a server costs at least ``NIC, accelerator, accelerator, NIC``
(:data:`SERVER_TRANSIT_HOPS` hops between two leaves) while the kept fabric joins any two of its
leaves in fewer (checked; where it does not, the whole topology is used). The tests time groups
on both and require the same result.

**Classes.** The sub-fabric is relabelled canonically (servers in order ``s0.``, ``s1.``, ...,
each device by its position in the server; fabric switches ``f0``, ``f1``, ... in topology
order), so two groups that sit on the fabric the same way, e.g. the DP groups of TP ranks 0 and
1, or the pipeline pairs of stages 0-1 and 1-2 in the same pod, give equal sub-topologies and
equal ranks: that pair is the group's **class key**, and :class:`GroupTimer` simulates each
(key, collective, size, dtype) once. The simulator is deterministic (same input, same output,
bit for bit), so reuse within a class is exact. Groups that are equivalent only up to a
permutation this labelling does not find are simply timed again: never a wrong reuse.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy.sparse import csr_matrix
from scipy.sparse.csgraph import shortest_path

from scaleup import hardware
from scaleup.topology.model import Device, Link, NodeKind, Topology
from scaleup.tune import BenchRequest, TuneSession

__all__ = ["SERVER_TRANSIT_HOPS", "GroupFabric", "GroupTimer", "group_fabric"]

#: Fewest hops from one leaf to another through a server whose NICs each join one accelerator:
#: leaf -> NIC -> accelerator -> accelerator -> NIC -> leaf.
SERVER_TRANSIT_HOPS = 5


@dataclass(frozen=True)
class GroupFabric:
    """A group's sub-fabric: the topology to time it on and its ranks there (the class key)."""

    topology: Topology
    ranks: tuple[int, ...]
    reduced: bool

    @property
    def key(self) -> tuple[Topology, tuple[int, ...]]:
        """Equal for groups that sit on the fabric the same way (see the module)."""
        return (self.topology, self.ranks)


def _is_network(tech: str) -> bool:
    link = hardware.link_tech(tech)  # Ethernet scoped as scale-up (UALink over Ethernet) is not
    return str(link.family) in ("infiniband", "ethernet") and str(link.scope) != "scale-up"


class _FabricIndex:
    """What :func:`group_fabric` needs of one topology, computed once: the scale-out switches,
    each server's devices and links, the links among switches, and whether servers attach to
    the fabric only through NICs of one accelerator each (the shape the exactness argument
    needs)."""

    def __init__(self, topology: Topology) -> None:
        self.topology = topology
        fabric: set[str] = set()
        for link in topology.links:
            if _is_network(link.tech):
                for end in (link.a, link.b):
                    if topology.device(end).kind is NodeKind.SWITCH:
                        fabric.add(end)
        self.fabric = fabric
        self.node_of = {d.id: d.node for d in topology.devices if d.id not in fabric}
        self.server_devices: dict[int, list[Device]] = {}
        for d in topology.devices:
            if d.id not in fabric:
                self.server_devices.setdefault(d.node, []).append(d)
        self.server_links: dict[int, list[tuple[int, Link]]] = {}
        self.fabric_links: list[tuple[int, Link]] = []
        self.uplinks: dict[int, list[tuple[int, Link]]] = {}  # server -> (index, NIC-switch link)
        self.regular = bool(fabric)
        nic_peers: dict[str, set[str]] = {}
        for i, link in enumerate(topology.links):
            a_fab, b_fab = link.a in fabric, link.b in fabric
            if a_fab and b_fab:
                self.fabric_links.append((i, link))
            elif a_fab or b_fab:
                end = link.b if a_fab else link.a
                self.uplinks.setdefault(self.node_of[end], []).append((i, link))
                if topology.device(end).kind is not NodeKind.NIC:
                    self.regular = False
            else:
                na, nb = self.node_of[link.a], self.node_of[link.b]
                if na != nb:
                    self.regular = False  # servers joined outside the fabric
                self.server_links.setdefault(na, []).append((i, link))
                for x, y in ((link.a, link.b), (link.b, link.a)):
                    if topology.device(x).kind is NodeKind.NIC:
                        nic_peers.setdefault(x, set()).add(y)
        accs = {d.id for d in topology.accelerators}
        if any(len(p) != 1 or not p <= accs for p in nic_peers.values()):
            self.regular = False
        per_acc: dict[str, int] = {}
        for peers in nic_peers.values():
            for a in peers:
                per_acc[a] = per_acc.get(a, 0) + 1
        if any(n > 1 for n in per_acc.values()):
            self.regular = False
        self.switch_ids = sorted(fabric, key=topology.index)
        self.switch_pos = {x: k for k, x in enumerate(self.switch_ids)}
        n = len(self.switch_ids)
        src = [self.switch_pos[lk.a] for _, lk in self.fabric_links]
        dst = [self.switch_pos[lk.b] for _, lk in self.fabric_links]
        self.graph = csr_matrix(
            (np.ones(2 * len(src)), (src + dst, dst + src)), shape=(max(n, 1), max(n, 1))
        )

    def on_shortest_paths(self, leaves: list[int]) -> np.ndarray | None:
        """Mask of the switches on a shortest path between two of ``leaves`` (switch positions),
        or None when two leaves are :data:`SERVER_TRANSIT_HOPS` or more apart (a detour through
        a server could tie)."""
        dist = shortest_path(self.graph, unweighted=True, directed=False, indices=leaves)
        dist = np.atleast_2d(dist)
        between = dist[:, leaves]
        if not np.isfinite(between).all() or between.max(initial=0) >= SERVER_TRANSIT_HOPS:
            return None
        keep = np.zeros(dist.shape[1], dtype=bool)
        for i in range(len(leaves)):
            keep |= ((dist[i][None, :] + dist) == between[i][:, None]).any(axis=0)
        return keep


def group_fabric(topology: Topology, ranks: Sequence[int], *, index: Any = None) -> GroupFabric:
    """The sub-fabric of ``ranks`` (accelerator indices) on ``topology`` (see the module).

    The whole topology (``reduced`` False) when it has no scale-out fabric, when its servers
    attach to the fabric other than through one NIC per accelerator, or when the group spans
    every server. ``index``: a precomputed ``_FabricIndex`` of ``topology`` (the timer keeps
    one per topology).

    Examples
    --------
    >>> from scaleup.topology import resolve_topology
    >>> t = resolve_topology("4xdgx-h100")
    >>> sub = group_fabric(t, [8, 16])          # GPU 0 of servers 1 and 2
    >>> len(sub.topology.accelerators), sub.ranks, sub.reduced
    (16, (0, 8), True)
    >>> group_fabric(t, [16, 24]).key == sub.key  # servers 2 and 3: the same class
    True
    """
    ranks = tuple(int(r) for r in ranks)
    idx = index if index is not None else _FabricIndex(topology)
    accs = topology.accelerators
    order: list[int] = []
    for r in ranks:
        node = accs[r].node
        if node not in order:
            order.append(node)
    if not idx.regular or len(order) == len(idx.server_devices):
        return GroupFabric(topology, ranks, False)
    servers = sorted(order)
    leaves = sorted(
        {
            idx.switch_pos[x]
            for s in servers
            for _, lk in idx.uplinks.get(s, [])
            for x in (lk.a, lk.b)
            if x in idx.fabric
        }
    )
    mask = idx.on_shortest_paths(leaves) if leaves else np.zeros(0, dtype=bool)
    if mask is None:
        return GroupFabric(topology, ranks, False)
    rename: dict[str, str] = {}
    devices: list[Device] = []
    picked: list[tuple[int, Device]] = []
    for j, s in enumerate(servers):
        for k, d in enumerate(idx.server_devices[s]):
            rename[d.id] = f"s{j}.d{k}"
            picked.append((topology.index(d.id), Device(rename[d.id], d.type, d.kind, j)))
    kept = [x for x, on in zip(idx.switch_ids, mask, strict=True) if on]
    for k, x in enumerate(kept):
        d = topology.device(x)
        rename[x] = f"f{k}"
        picked.append((topology.index(x), Device(rename[x], d.type, d.kind, 0)))
    devices = [d for _, d in sorted(picked, key=lambda p: p[0])]
    chosen = [lk for s in servers for lk in idx.server_links.get(s, [])]
    chosen += [lk for s in servers for lk in idx.uplinks.get(s, [])]
    chosen += [(i, lk) for i, lk in idx.fabric_links if lk.a in rename and lk.b in rename]
    links = [
        Link(rename[lk.a], rename[lk.b], lk.tech, lk.count, lk.bandwidth_gb_per_s)
        for _, lk in sorted(chosen, key=lambda p: p[0])
    ]
    name = f"{topology.name}[{len(servers)} servers]"
    sub = Topology(name, tuple(devices), tuple(links), topology.peer_access, topology.description)
    position = {d.id: r for r, d in enumerate(sub.accelerators)}
    return GroupFabric(sub, tuple(position[rename[accs[r].id]] for r in ranks), True)


class GroupTimer:
    """The planner's collective timer: each group timed on its sub-fabric, once per class.

    ``timer(topology, collective, nbytes, ranks=..., dtype=...) -> seconds``, as
    :class:`~scaleup.tune.CollectiveTimer`, with one :class:`~scaleup.tune.TuneSession` for every
    question. It asks the session's :meth:`~scaleup.tune.TuneSession.sweep`, the branch and
    bound over the same candidates as :meth:`~scaleup.tune.TuneSession.tune`: a candidate is
    skipped only when a lower bound of its time already reaches the best simulated, so the
    least time is the same (a 32-rank DP all-reduce: 10 of 49 candidates simulated, 4x faster,
    the same time to the bit). ``classes`` counts the distinct (class, collective, size, dtype)
    simulated; ``calls`` the questions.
    """

    def __init__(self, session: TuneSession | None = None) -> None:
        self.session = session or TuneSession()
        self._index: dict[int, tuple[Topology, _FabricIndex]] = {}
        self._fabrics: dict[tuple[int, tuple[int, ...]], GroupFabric] = {}
        self._times: dict[tuple[Any, ...], float] = {}
        self.calls = 0

    @property
    def classes(self) -> int:
        """Distinct (class key, collective, size, dtype) simulated so far."""
        return len(self._times)

    def fabric(self, topology: Topology, ranks: Sequence[int]) -> GroupFabric:
        """The sub-fabric of ``ranks`` on ``topology`` (cached per topology and group)."""
        held = self._index.get(id(topology))
        if held is None or held[0] is not topology:
            held = self._index[id(topology)] = (topology, _FabricIndex(topology))
        key = (id(topology), tuple(int(r) for r in ranks))
        fab = self._fabrics.get(key)
        if fab is None:
            fab = self._fabrics[key] = group_fabric(topology, key[1], index=held[1])
        return fab

    def prefetch(
        self, topology: Topology, questions: Iterable[tuple[str, int, Sequence[int], str]]
    ) -> None:
        """Time several ``(collective, nbytes, ranks, dtype)`` at once: the sizes of one class
        and collective go to one :meth:`~scaleup.tune.TuneSession.sweep`, whose branch and bound
        prunes a larger size's candidates with a smaller size's times (the same least times as
        asking one by one). Later calls with these questions are answered from memory."""
        todo: dict[tuple[Any, ...], tuple[GroupFabric, set[int]]] = {}
        for collective, nbytes, ranks, dtype in questions:
            if len(ranks) <= 1:
                continue
            fab = self.fabric(topology, ranks)
            if (fab.key, collective, int(nbytes), dtype) in self._times:
                continue
            todo.setdefault((fab.key, collective, dtype), (fab, set()))[1].add(int(nbytes))
        for (_, collective, dtype), (fab, sizes) in todo.items():
            self._sweep(fab, collective, dtype, sorted(sizes))

    def _sweep(self, fab: GroupFabric, collective: str, dtype: str, sizes: list[int]) -> None:
        request = BenchRequest(op=collective, sizes_bytes=tuple(sizes), dtype=dtype)
        choices = self.session.sweep(fab.topology, request, group=fab.ranks)
        for nbytes, choice in zip(sizes, choices, strict=True):
            self._times[(fab.key, collective, nbytes, dtype)] = float(choice.time_s)

    def __call__(
        self,
        topology: Topology,
        collective: str,
        nbytes: int,
        *,
        ranks: Sequence[int] | None = None,
        dtype: str = "float32",
    ) -> float:
        self.calls += 1
        group = tuple(range(len(topology.accelerators))) if ranks is None else tuple(ranks)
        if len(group) <= 1:
            return 0.0
        fab = self.fabric(topology, group)
        key = (fab.key, collective, int(nbytes), dtype)
        if key not in self._times:
            self._sweep(fab, collective, dtype, [int(nbytes)])
        return self._times[key]
