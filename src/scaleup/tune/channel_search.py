"""Channel search: the rings, trees and NVLS heads a vendor library would build on a topology.

NCCL (``src/graph/search.cc``) and RCCL (the same search, plus hand-made node models in
``src/graph/rome_models.cc``) turn a communicator into *channels*: on one server a channel is a
closed ring through every GPU; across servers it is, on every server, a path NET -> GPU ... GPU ->
NET, the servers' paths chained into one ring, each channel entering and leaving through its own
NICs; a tree channel is a chain inside each server under a double binary tree over the servers.
This module finds such channels for any :class:`~scaleup.topology.model.Topology` and any subset
of its accelerators (``ranks``: the search runs on the induced fabric of those ranks).

The search (see docs/models.md, "Channel search"):

1. Split the ranks by server; servers with the same wiring share one search (a server *shape*).
2. Per shape, list candidate per-channel speeds: every arc bandwidth, cut bandwidth and
   accelerator budget divided by 1 .. ``max_channels`` (NCCL tries a fixed descending array).
3. From the fastest speed down, pack as many paths as fit the arcs at that speed
   (:mod:`~scaleup.tune.channel_pack`: on a switched server every order is as good, so channel
   ``c`` starts at rank ``c`` round the server; on a uniform full mesh the known decompositions
   of :mod:`~scaleup.tune.channel_seeds`; else the depth-first :mod:`~scaleup.tune.channel_dfs`,
   direct links first, backtracking across paths under an expansion budget). Keep the speed whose
   ``count x speed`` is largest (ties: the faster speed); speeds whose upper bound (a cut of
   one or two accelerators, the NICs) cannot beat the best are skipped.
4. Chain the servers' paths into rings (odd servers run their paths reversed, so that every
   crossing joins NICs of one rail), or hang the chains under the double binary tree.

Ranks in the plan are *communicator* ranks: positions in ``ranks`` (rank ``r`` is the
accelerator ``topology.accelerators[plan.ranks[r]]``), as the algorithm builders number them.

Examples
--------
>>> from scaleup.topology.presets import resolve_topology
>>> plan = search_rings(resolve_topology("mi300x-8"))
>>> plan.n_channels, round(plan.bandwidth_bytes_per_s / 1e9)
(7, 64)
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from scaleup import hardware
from scaleup.errors import NoRouteError, UsageError
from scaleup.topology.model import Channel as Arc
from scaleup.topology.model import NodeKind, Topology
from scaleup.topology.torus import torus_group
from scaleup.tune.channel_graph import CHAIN, PATH, REL_TOL, RING, NodeGraph, is_network
from scaleup.tune.channel_orbits import orbit_paths
from scaleup.tune.channel_pack import Shape
from scaleup.tune.channel_plan import Channel, ChannelPlan, Segment, double_binary_tree

__all__ = [
    "MAX_CHANNELS",
    "SEARCH_BUDGET",
    "Wiring",
    "Channel",
    "ChannelPlan",
    "Segment",
    "double_binary_tree",
    "link_loads",
    "nvidia_parts",
    "nvls_heads",
    "NCCL_MAX_NVLS_ARITY",
    "search_rings",
    "search_trees",
]

#: Most channels searched (NCCL's MAXCHANNELS is 32 up to 2.22 and 64 since; its ring search
#: looks for at most half of that before duplicating channels).
MAX_CHANNELS = 32
#: Depth-first expansions allowed per server shape and speed: bounds the search's cost on
#: graphs where the upper bound cannot be reached (NCCL bounds its search by time instead).
SEARCH_BUDGET = 10_000
#: Most NVLS heads (channels of NCCL's NVLS graph) on one NVLink domain: ``NCCL_MAX_NVLS_ARITY``
#: (NVIDIA/nccl ``src/include/device.h`` line 213; ``src/graph/search.cc`` lines 1125-1128 cap
#: the graph's channels at it, and ``src/enqueue.cc`` lines 2004-2006 disable NVLS all_gather
#: and reduce_scatter on domains of more ranks).
NCCL_MAX_NVLS_ARITY = 32


# -- the search --------------------------------------------------------------------------------
def search_rings(
    topology: Topology,
    ranks: Sequence[int] | None = None,
    *,
    max_channels: int = MAX_CHANNELS,
    max_channel_bw_bytes_per_s: float | None = None,
    budget: int = SEARCH_BUDGET,
    wiring: Wiring | None = None,
) -> ChannelPlan:
    """The ring channels on ``ranks`` (accelerator indices, default all): closed rings on one
    server, per-server NET -> GPU ... GPU -> NET paths chained into rings across servers.

    ``max_channel_bw_bytes_per_s`` caps the per-channel speed (what one channel's thread block
    can drive: NCCL's speed arrays start at 60 GB/s on sm90); None: only the links bound it.
    """
    knobs = _knobs(max_channels, budget, max_channel_bw_bytes_per_s)
    return _search(topology, _ranks(topology, ranks), "ring", *knobs, _wired(topology, wiring))


def search_trees(
    topology: Topology,
    ranks: Sequence[int] | None = None,
    *,
    max_channels: int = MAX_CHANNELS,
    max_channel_bw_bytes_per_s: float | None = None,
    budget: int = SEARCH_BUDGET,
    wiring: Wiring | None = None,
) -> ChannelPlan:
    """The tree channels: per server a chain from a head (whose NIC joins the tree across
    servers), every hop carrying bytes both ways; across servers NCCL's double binary tree."""
    knobs = _knobs(max_channels, budget, max_channel_bw_bytes_per_s)
    return _search(topology, _ranks(topology, ranks), "tree", *knobs, _wired(topology, wiring))


def nvls_heads(
    topology: Topology, ranks: Sequence[int] | None = None, *, wiring: Wiring | None = None
) -> ChannelPlan:
    """NVLS heads: on one server every rank heads one channel (its slice of the in-switch
    reduction; the channel's bandwidth is the rank's port bandwidth over the heads), up to
    :data:`NCCL_MAX_NVLS_ARITY` heads (ranks 0..31: search.cc gives channel ``c`` to GPU ``c``,
    lines 858-860); across servers one head per NIC, the rank nearest it, which also carries the
    tree across servers (NVLS-Tree) at its NIC's bandwidth, likewise at most 32 (an NVL72 rack's
    NVLS-Tree drives 32 of its 72 NICs). The cap is NCCL's, so it holds for NVIDIA parts only
    (as :class:`~scaleup.tune.channels.GroupShape`'s). Whether NVLS applies at all is the
    tuner's rule."""
    chosen = _ranks(topology, ranks)
    cap = NCCL_MAX_NVLS_ARITY if nvidia_parts(topology, chosen) else len(chosen)
    wiring = _wired(topology, wiring)
    servers = wiring.layout(chosen)
    incident = wiring.incident
    if len(servers) == 1:
        srv = servers[0]
        graph = _graph(topology, srv, incident)
        count = min(graph.n, cap)
        bw = min(graph.port_capacity(i) for i in range(graph.n)) / count
        singles = tuple(
            Channel(i, (Segment(srv.node, (r,)),), bw) for i, r in enumerate(srv.comm[:count])
        )
        return ChannelPlan("nvls", chosen, singles, node_trees=((-1,), (-1,)))
    heads: list[list[tuple[str, int, float]]] = []
    graphs: dict[int, NodeGraph] = {}  # identical servers share one graph
    for srv in servers:
        key = wiring.server_class(srv)
        if key not in graphs:
            graphs[key] = _graph(topology, srv, incident)
        graph = graphs[key]
        own: dict[str, tuple[str, int, float]] = {}
        for i, nic in enumerate(graph.nic_of):
            load = graph.nic_in[i]
            if nic is not None and load and nic not in own:
                here = srv.devices[graph.local[nic]]  # the graph may be another server's
                own[nic] = (here, srv.comm[i], min(graph.capacity[a] / f for a, f in load))
        heads.append(list(own.values()))
    count = min(min(len(h) for h in heads), cap)
    bw = min(speed for h in heads for _, _, speed in h[:count])
    channels = tuple(
        Channel(
            c,
            tuple(
                Segment(srv.node, (h[c][1],), h[c][0], h[c][0])
                for srv, h in zip(servers, heads, strict=True)
            ),
            bw,
        )
        for c in range(count)
    )
    return ChannelPlan("nvls", chosen, channels, node_trees=double_binary_tree(len(servers)))


def nvidia_parts(topology: Topology, ranks: Sequence[int] | None = None) -> bool:
    """Whether every accelerator of the group is NVIDIA's: where NCCL's NVLS limits
    (:data:`NCCL_MAX_NVLS_ARITY`) hold; an in-switch reduction of other parts keeps none."""
    accs = topology.accelerators
    chosen = accs if ranks is None else [accs[int(r)] for r in ranks]
    return all(str(hardware.accelerator(a.type).vendor) == "nvidia" for a in chosen)


def link_loads(plan: ChannelPlan, topology: Topology) -> dict[tuple[str, str], float]:
    """Bytes per second on every arc ``(src, dst)`` when every channel of a ring or tree plan
    runs at its bandwidth, recomputed server by server from the plan's segments (a check)."""
    if plan.kind not in ("ring", "tree"):
        raise UsageError(f"link_loads takes a ring or tree plan, not {plan.kind}", source="plan")
    servers = {srv.node: srv for srv in _layout(topology, plan.ranks)}
    kind = _path_kind(plan.kind, len(servers))
    incident = _incident(topology)
    out: dict[tuple[str, str], float] = {}
    for node, srv in servers.items():
        shape = Shape(
            _graph(topology, srv, incident), kind, 1, 1, nics=len(servers) > 1, routed=True
        )
        local = {r: i for i, r in enumerate(srv.comm)}
        for channel in plan.channels:
            seg = next(s for s in channel.segments if s.node == node)
            for arc, frac in shape.load_of([local[r] for r in seg.ranks]):
                key = shape.graph.arcs[arc]
                out[key] = out.get(key, 0.0) + frac * channel.bandwidth_bytes_per_s
    return out


# -- helpers -----------------------------------------------------------------------------------
def _ranks(topology: Topology, ranks: Sequence[int] | None) -> tuple[int, ...]:
    n = len(topology.accelerators)
    if ranks is None:
        return tuple(range(n))
    chosen = tuple(int(r) for r in ranks)
    if not chosen or len(set(chosen)) != len(chosen) or not all(0 <= r < n for r in chosen):
        raise UsageError(
            f"ranks must be distinct accelerator indices in 0..{n - 1}, got {list(ranks)}",
            source="ranks",
        )
    return chosen


def _knobs(max_channels: int, budget: int, max_bw: float | None) -> tuple[int, int, float | None]:
    for name, value in (("max_channels", max_channels), ("budget", budget)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise UsageError(f"{name} must be a positive integer, got {value!r}", source=name)
    if max_bw is not None and not (isinstance(max_bw, (int, float)) and 0 < max_bw < math.inf):
        raise UsageError(
            f"max_channel_bw_bytes_per_s must be a positive number, got {max_bw!r}",
            source="max_channel_bw_bytes_per_s",
        )
    return max_channels, budget, None if max_bw is None else float(max_bw)


@dataclass(frozen=True)
class _Server:
    """The ranks of one server: its index, member ids, communicator ranks and the devices its
    channels may cross (topology order)."""

    node: int
    members: tuple[str, ...]
    comm: tuple[int, ...]
    devices: tuple[str, ...]


def _layout(topology: Topology, ranks: tuple[int, ...]) -> list[_Server]:
    """The servers of ``ranks``, ascending; one server over all of them when a server of the
    ranks has no NIC (channels cannot leave it through the network)."""
    accs = topology.accelerators
    by_node: dict[int, tuple[list[str], list[int]]] = {}
    for comm, a in enumerate(ranks):
        ids, comms = by_node.setdefault(accs[a].node, ([], []))
        ids.append(accs[a].id)
        comms.append(comm)
    nodes = sorted(by_node)
    with_nic = {d.node for d in topology.nics}
    if len(nodes) > 1 and not all(n in with_nic for n in nodes):
        everything = tuple(d.id for d in topology.devices if d.kind is not NodeKind.NIC)
        every_rank = tuple(accs[a].id for a in ranks)
        return [_Server(nodes[0], every_rank, tuple(range(len(ranks))), everything)]
    fabric = _scale_out(topology)
    per_node: dict[int, list[str]] = {}
    for d in topology.devices:
        if d.node in by_node and d.id not in fabric:
            per_node.setdefault(d.node, []).append(d.id)
    return [
        _Server(n, tuple(by_node[n][0]), tuple(by_node[n][1]), tuple(per_node[n])) for n in nodes
    ]


def _scale_out(topology: Topology) -> frozenset[str]:
    """Switches of the scale-out fabric (any of their links is InfiniBand or Ethernet): read
    off the links, a technology's kind asked once (a channel per link direction doubles the
    work, and a 16,384-GPU fabric has ~150,000 links)."""
    network = {tech: is_network(tech) for tech in {link.tech for link in topology.links}}
    switches = {d.id for d in topology.devices if d.kind is NodeKind.SWITCH}
    ends = {x for link in topology.links if network[link.tech] for x in (link.a, link.b)}
    return frozenset(ends & switches)


def _graph(
    topology: Topology, srv: _Server, incident: dict[str, tuple[Arc, ...]] | None = None
) -> NodeGraph:
    incident = _incident(topology) if incident is None else incident
    arcs = {(c.src, c.dst): c for d in srv.devices for c in incident[d]}
    return NodeGraph(topology, srv.members, srv.devices, list(arcs.values()))


def _incident(topology: Topology) -> dict[str, tuple[Arc, ...]]:
    """The channels into and out of every device."""
    out: dict[str, list[Arc]] = {d.id: [] for d in topology.devices}
    for c in topology.channels:
        out[c.src].append(c)
        out[c.dst].append(c)
    return {d: tuple(cs) for d, cs in out.items()}


def _wired(topology: Topology, wiring: Wiring | None) -> Wiring:
    """``wiring`` if it is ``topology``'s (that object or an equal one: a session keys its
    wirings by equality), else a new one (a UsageError for another topology's)."""
    if wiring is None:
        return Wiring(topology)
    if wiring.topology is not topology and wiring.topology != topology:
        raise UsageError("the wiring passed is another topology's", source="wiring")
    return wiring


def _path_kind(kind: str, servers: int) -> str:
    return CHAIN if kind == "tree" else (RING if servers == 1 else PATH)


def _search(
    topology: Topology,
    ranks: tuple[int, ...],
    kind: str,
    max_channels: int,
    budget: int,
    max_bw: float | None,
    wiring: Wiring,
) -> ChannelPlan:
    servers = wiring.layout(ranks)
    node_trees = double_binary_tree(len(servers)) if kind == "tree" else ()
    if len(ranks) == 1:
        only = Channel(0, (Segment(servers[0].node, (0,)),), math.inf)
        return ChannelPlan(kind, ranks, (only,), node_trees=node_trees)
    path_kind = _path_kind(kind, len(servers))
    incident = wiring.incident
    # identical servers share one search (one server: no wiring signature to read)
    keys = [wiring.server_class(srv) for srv in servers] if len(servers) > 1 else [0]
    graphs: dict[int, NodeGraph] = {}
    for key, srv in zip(keys, servers, strict=True):
        if key not in graphs:
            graphs[key] = _graph(topology, srv, incident)
    grid = torus_group(topology, ranks) if len(servers) == 1 else None
    for routed in (False, True):  # hops without a direct link only where direct links fail
        across = len(servers) > 1
        shapes = {
            k: Shape(g, path_kind, max_channels, budget, nics=across, routed=routed, grid=grid)
            for k, g in graphs.items()
        }
        unique = list(shapes.values())
        count, found = _best(unique, max_channels, max_bw)
        if count:
            break
    else:  # NCCL's fallback (src/graph/search.cc, "falling back to simple order"): one
        # channel in rank order over whatever routes exist; none at all is an error
        count, found = 1, [[tuple(range(shape.graph.n))] for shape in unique]
        try:
            limits = [shape.speed_limit(p) for shape, p in zip(unique, found, strict=True)]
        except NoRouteError:
            limits = [0.0]
        if not min(limits) > 0:
            raise NoRouteError(f"no channel fits the links of ranks {list(ranks)}", source="ranks")
    found = [_symmetric(shape, p) for shape, p in zip(unique, found, strict=True)]
    paths = dict(zip(shapes, found, strict=True))
    bw = min(shape.speed_limit(p) for shape, p in zip(unique, found, strict=True))
    bw = bw if max_bw is None else min(bw, max_bw)
    bound = tuple(a for shape, p in zip(unique, found, strict=True) for a in shape.saturated(p, bw))
    channels: list[Channel] = []
    for c in range(count):
        segments = []
        for pos, (srv, key) in enumerate(zip(servers, keys, strict=True)):
            local = paths[key][c]
            if path_kind == PATH and pos % 2:  # odd servers run reversed: crossings stay on a rail
                local = local[::-1]
            nics = _nics(shapes[key], srv, local)
            segments.append(Segment(srv.node, tuple(srv.comm[i] for i in local), *nics))
        channels.append(Channel(c, tuple(segments), bw))
    return ChannelPlan(kind, ranks, tuple(channels), bound, node_trees)


def _symmetric(shape: Shape, paths: list[tuple[int, ...]]) -> list[tuple[int, ...]]:
    """``paths`` or, where they are one channel per member, as many channels at their speed
    built from the server's symmetry (:mod:`~scaleup.tune.channel_orbits`): the plan's count
    and speed stay, and the simulator can fold its channels onto a few."""
    if len(paths) != shape.graph.n or shape.graph.switched:
        return paths
    images = orbit_paths(shape, shape.speed_limit(paths))
    return images if len(images) == len(paths) else paths


def _best(
    shapes: list[Shape], max_channels: int, max_bw: float | None
) -> tuple[int, list[list[tuple[int, ...]]]]:
    """The speed (and the shapes' paths at it) with the largest count x speed."""
    speeds = sorted({s for shape in shapes for s in shape.speeds()}, reverse=True)
    if max_bw is not None:  # the cap itself, then what fits under it
        speeds = [max_bw] + [s for s in speeds if s < max_bw * (1 - REL_TOL)]
    best_total = 0.0
    best: tuple[int, list[list[tuple[int, ...]]]] = (0, [])
    for speed in speeds:
        target = min([max_channels] + [shape.upper_bound(speed) for shape in shapes])
        if target * speed <= best_total * (1 + REL_TOL):
            continue
        found = []
        for shape in shapes:
            paths = shape.solve(speed, target)
            target = min(target, len(paths))
            found.append(paths)
            if not target:
                break
        if target and target * speed > best_total * (1 + REL_TOL):
            best_total, best = target * speed, (target, [p[:target] for p in found])
    return best


def _signature(
    topology: Topology, srv: _Server, incident: dict[str, tuple[Arc, ...]]
) -> tuple[object, ...]:
    """A server's wiring in device positions: equal for the copies ``Nx<preset>`` makes."""
    pos = {d: i for i, d in enumerate(srv.devices)}
    arcs = sorted(
        {
            (pos.get(c.src, -1), pos.get(c.dst, -1), c.bandwidth_bytes_per_s, c.tech)
            for d in srv.devices
            for c in incident[d]
        }
    )
    types = tuple(topology.device(d).type for d in srv.devices)
    return (tuple(pos[m] for m in srv.members), types, tuple(arcs))


class Wiring:
    """A topology's channels by device, its servers and their wiring classes, kept between
    searches (:class:`~scaleup.tune.channels.GroupShape` runs three on one topology, each
    reading them for every server: ~0.5 s a search at 16,384 GPUs). Pass one as ``wiring`` to
    the searches of one topology; each search makes its own otherwise."""

    def __init__(self, topology: Topology) -> None:
        self.topology = topology
        #: the channels into and out of every device
        self.incident = _incident(topology)
        self._class_of: dict[tuple[tuple[str, ...], tuple[str, ...]], int] = {}
        self._classes: dict[tuple[object, ...], int] = {}
        self._layouts: dict[tuple[int, ...], tuple[_Server, ...]] = {}

    def layout(self, ranks: tuple[int, ...]) -> tuple[_Server, ...]:
        """:func:`_layout` of ``ranks``, kept."""
        found = self._layouts.get(ranks)
        if found is None:
            found = self._layouts[ranks] = tuple(_layout(self.topology, ranks))
        return found

    def server_class(self, srv: _Server) -> int:
        """A number equal for two servers exactly when their :func:`_signature` s are."""
        key = (srv.members, srv.devices)
        found = self._class_of.get(key)
        if found is None:
            sig = _signature(self.topology, srv, self.incident)
            found = self._class_of[key] = self._classes.setdefault(sig, len(self._classes))
        return found


def _nics(shape: Shape, srv: _Server, local: tuple[int, ...]) -> tuple[str | None, str | None]:
    """The NICs of this server a segment enters and leaves through (by device position: the
    shape's graph may be another, identical server's)."""
    if not shape.nics:
        return None, None
    graph = shape.graph
    first = graph.nic_of[local[0]]
    last = graph.nic_of[local[-1]] if shape.kind == PATH else first

    def here(nic: str | None) -> str | None:
        return None if nic is None else srv.devices[graph.local[nic]]

    return here(first), here(last)
