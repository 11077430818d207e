"""The inputs of NCCL's cost model (:mod:`scaleup.tune.nccl_model`) for a group of ranks.

NCCL's model reads its topology search's graphs: per-channel bandwidth (always one entry of
the search's speed arrays), channel count, link type. The channel search here
(:mod:`scaleup.tune.channel_search`) finds the same structures at raw link rates, so this
module turns its plans into NCCL's figures:

1. **Units.** NCCL counts an NVLink at its own per-link figure (``ncclTopoNVLinkBw``,
   ``src/graph/topo.h`` lines 19-24: SM80 20, SM90 20.6, SM100 40.1 GB/s), which
   :data:`scaleup.sim.params.LINK_EFFICIENCY` holds as a fraction of the raw rate; a PCIe x16
   link at ``PCI_BW`` 12 GB/s for Gen3 (topo.h line 25; scaled with the generation); a NIC at
   its port speed (raw). A plan bound by NVLink is scaled so; one bound by NICs is not.
2. **Speeds.** ``ncclTopoCompute`` (``src/graph/search.cc`` lines 1160-1290) tries per-channel
   speeds from a descending array (``speedArrayIntra``/``Inter`` and the sm90 / sm100 ones,
   lines 1051-1064; intra-node arrays on one node, inter-node ones across nodes), keeps the
   graph of most ``nChannels x bw`` (``ncclTopoCompareGraphs``, lines 445-466; the first found
   on a tie) and stops lowering the speed once the next is under 0.49 of the best found
   (line 1244). Here a channel at speed ``s`` takes ``s`` of one unit: the rank's NVLink
   bandwidth on one node (a switch or a mesh taken as one pool), one NIC across nodes (the
   plan's distinct NICs on its first server, sharing its bandwidth).
3. **Duplication.** ``ncclTopoDupChannels`` (search.cc lines 1036-1049) doubles the channels
   and halves their speed when ``bwIntra >= 25`` unless ``ccMin > 80 && bwIntra < 50 &&
   nChannels > 4``.
4. **Trees** are searched with ``minChannels = maxChannels`` = the ring's count
   (``src/init.cc`` lines 1181-1185) on the same speeds: the ring's graph is taken, and on two
   nodes pass 2 raises ``bwIntra`` towards twice ``bwInter`` (search.cc lines 1279-1282) while
   the rank's NVLink bandwidth carries the channels. Balanced trees assumed
   (``maxTreePattern`` not TREE: no x0.85).
5. **NVLS.** One channel per head (:func:`~scaleup.tune.channel_search.nvls_heads`; search.cc
   line 1127: at most one per GPU); on one node ``bwIntra`` is the fastest speed the rank's
   port share carries and pass 2 raises ``bwInter`` towards twice it (search.cc lines
   1274-1278); across nodes both are the NIC's speed.
6. **Channels run.** ``comm->nChannels`` is min(tree, ring) channels (init.cc line 1459),
   doubled by ``ncclTopoPostset`` (``src/graph/connect.cc`` line 460, at most ``MAXCHANNELS``
   64); NVLS runs ``comm->nvlsChannels``: 16 on Hopper, 24 on one Blackwell node, 32 across
   nodes (``src/transport/nvls.cc`` lines 155-157, 209-214), at most the communicator's channels
   across nodes (enqueue.cc lines 2084-2091).
7. **Reported NIC latency.** Across nodes every graph's ``latencyInter`` is what the network
   plugin reports for its NICs (the catalog NIC's ``reported_latency_s``): 0 for NCCL's own
   InfiniBand / RoCE transport, 75 us for AWS EFA through aws-ofi-nccl on p4d/p5, which NCCL's
   model adds to each inter-node step (twice for Simple, tuning.cc lines 389-391).

What this leaves out (docs/models.md, "NCCL's selection"): NCCL's search timeouts and the
crossNic / typeIntra passes, the balanced tree's half-count of the NIC on its first GPU, PCIe
generations beyond the x16 scale, and the host CPU (``cpu="other"``: NCCL's 1 us network
overhead and the Intel row of ``llMaxBws``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Final

from scaleup import hardware
from scaleup.sim.paths import link_efficiency
from scaleup.sim.protocols import library_for
from scaleup.topology import analysis
from scaleup.topology.model import Topology
from scaleup.tune.channel_plan import ChannelPlan
from scaleup.tune.channel_search import nvls_heads
from scaleup.tune.channels import GroupShape
from scaleup.tune.nccl_model import ARCH_INDEX, Graph, ModelInputs
from scaleup.tune.rccl_inputs import rccl_model_inputs
from scaleup.tune.size_channels import nvls_channel_count

__all__ = [
    "MAXCHANNELS",
    "NVLS_CHANNELS",
    "SPEEDS_INTER",
    "SPEEDS_INTRA",
    "comm_channels_for",
    "dup_channels",
    "model_inputs",
    "nvls_channels",
    "search_speed",
]

#: ``MAXCHANNELS`` (src/include/device.h line 91); the ring search asks for at most half
#: (init.cc line 1177).
MAXCHANNELS: Final = 64
#: ``speedArrayIntra`` / ``sm90SpeedArrayIntra`` / ``sm100SpeedArrayIntra`` by compute
#: capability floor (search.cc lines 1051, 1057, 1063).
SPEEDS_INTRA: Final = {
    0: (40.0, 30.0, 20.0, 18.0, 15.0, 12.0, 10.0, 9.0, 7.0, 6.0, 5.0, 4.0, 3.0),
    90: (60.0, 50.0, 40.0, 30.0, 24.0, 20.0, 15.0, 12.0, 11.0, 6.0, 3.0),
    100: (90.0, 80.0, 70.0, 60.0, 50.0, 45.0, 40.0, 30.0, 24.0, 20.0, 19.0, 18.0),
}
#: ``speedArrayInter`` / ``sm90SpeedArrayInter`` / ``sm100SpeedArrayInter`` (search.cc lines
#: 1052-1053, 1058-1059, 1064-1065).
SPEEDS_INTER: Final = {
    0: (48.0, 30.0, 28.0, 24.0, 20.0, 18.0, 15.0, 12.0, 10.0, 9.0,
        7.0, 6.0, 5.0, 4.0, 3.0, 2.4, 1.2, 0.24, 0.12),
    90: (48.0, 45.0, 42.0, 40.0, 30.0, 24.0, 22.0, 20.0, 17.5,
         15.0, 12.0, 6.0, 3.0, 2.4, 1.2, 0.24, 0.12),
    100: (96.0, 86.0, 80.0, 48.0, 45.1, 42.0, 40.0, 30.0, 24.0, 22.0,
          20.0, 17.5, 15.0, 12.0, 6.0, 3.0, 2.4, 1.2, 0.24, 0.12),
}  # fmt: skip
#: ``NVLS_NCHANNELS_SM90`` 16, ``NVLS_NCHANNELS_SM100_NVL`` 24 (one node),
#: ``NVLS_NCHANNELS_SM100`` 32 (several) (src/transport/nvls.cc lines 155-157, 209-214).
NVLS_CHANNELS: Final = {(90, False): 16, (90, True): 16, (100, False): 24, (100, True): 32}
#: ``PCI_BW`` (topo.h line 25): 12 GB/s for a Gen3 x16 link, whose raw rate is 15.75 GB/s.
_PCI_FACTOR: Final = 12.0 / (16 * 8.0 * 128 / 130 / 8)
_NIC_FAMILIES: Final = frozenset({"infiniband", "ethernet"})
_EPS: Final = 1e-9


def _speeds(arrays: dict[int, tuple[float, ...]], compcap: int) -> tuple[float, ...]:
    return arrays[100 if compcap >= 100 else 90 if compcap >= 90 else 0]


def search_speed(
    units: Sequence[float], speeds: Sequence[float], max_channels: int = MAXCHANNELS // 2
) -> tuple[int, float]:
    """(nChannels, bw) of NCCL's speed search over ``units`` (GB/s each; a channel at speed s
    takes s of one unit): the most ``n x s``, the faster on a tie, lowering the speed while the
    next is above 0.49 of the best found (search.cc lines 1160-1250); (0, 0.0) if none fits.

    >>> search_speed([370.8], (60.0, 50.0, 40.0, 30.0, 24.0))
    (6, 60.0)
    >>> search_speed([25.0] * 4, (48.0, 30.0, 28.0, 24.0, 20.0, 18.0, 15.0, 12.0, 10.0))
    (4, 24.0)
    """
    top = max(units, default=0.0)
    i = 0
    while i < len(speeds) - 1 and speeds[i] > top + _EPS:  # maxBw (line 1170)
        i += 1
    best = (0, 0.0)
    while True:
        s = speeds[i]
        n = min(max_channels, sum(int(u / s + _EPS) for u in units))
        if n > 0 and n * s > best[0] * best[1] + _EPS:
            best = (n, s)
        if i < len(speeds) - 1 and (best[0] == 0 or speeds[i + 1] / best[1] > 0.49):
            i += 1
            continue
        return best


def dup_channels(n: int, bw: float, compcap: int, max_channels: int = MAXCHANNELS // 2) -> Graph:
    """``ncclTopoDupChannels`` (search.cc lines 1036-1049) on a ring or tree graph.

    >>> g = dup_channels(6, 60.0, 90)
    >>> g.n_channels, g.bw_intra
    (12, 30.0)
    """
    if n == 0 or bw < 25.0 or (compcap > 80 and bw < 50.0 and n > 4):
        return Graph(n, bw, bw)
    dup = min(2 * n, max_channels)
    div = -(-dup // n)
    return Graph(dup, bw / div, bw / div)


def _plan_factor(topology: Topology, plan: ChannelPlan) -> tuple[float, bool]:
    """NCCL's units per raw byte of the plan's binding links, and whether NICs bind it."""
    factors = []
    nic = False
    for arc in plan.bound:
        tech = topology.channels[topology.channel_index[arc]].tech
        family = str(hardware.link_tech(tech).family)
        if family in _NIC_FAMILIES:
            nic = True
            factors.append(1.0)
        elif family == "pcie":
            factors.append(_PCI_FACTOR)
        else:
            factors.append(link_efficiency(tech))
    return (min(factors) if factors else 1.0), nic


def _nics(plan: ChannelPlan) -> int:
    first = {seg.nic_out for ch in plan.channels for seg in ch.segments[:1]}
    first |= {seg.nic_in for ch in plan.channels for seg in ch.segments[:1]}
    return max(1, len(first - {None}))


def _ring_graph(
    topology: Topology, shape: GroupShape, multi: bool, compcap: int, nvlink: bool
) -> tuple[Graph, float] | None:
    """The ring graph after duplication, and the rank's NVLink bandwidth in NCCL's units."""
    plan = shape.rings
    if plan is None or plan.n_channels == 0:
        return None
    factor, nic_bound = _plan_factor(topology, plan)
    total = plan.total_bandwidth_bytes_per_s / 1e9
    local = shape.local_rings if multi else plan
    intra_total = total * factor
    if local is not None and local.n_channels:
        lf, _ = _plan_factor(topology, local)
        intra_total = local.total_bandwidth_bytes_per_s / 1e9 * lf
    if multi and nic_bound:
        k = _nics(plan)
        units = [total / k] * k
    else:
        units = [total * factor]
    speeds = _speeds(SPEEDS_INTER if multi else SPEEDS_INTRA, compcap)
    n, bw = search_speed(units, speeds)
    if n == 0:
        return None
    g = dup_channels(n, bw, compcap)
    return Graph(g.n_channels, g.bw_intra, g.bw_inter, nvlink=nvlink), intra_total


def _tree_graph(ring: Graph, intra_total: float, nnodes: int, compcap: int) -> Graph:
    """The tree graph: the ring's channels and speed; on two nodes ``bwIntra`` raised one speed
    at a time while under twice ``bwInter`` and the rank's NVLink carries the channels."""
    if nnodes != 2:
        return ring
    speeds = _speeds(SPEEDS_INTER, compcap)
    bw_intra = ring.bw_intra
    for s in sorted(speeds):
        if bw_intra < s <= 2 * ring.bw_inter + _EPS and ring.n_channels * s <= intra_total + _EPS:
            bw_intra = s
    return Graph(ring.n_channels, bw_intra, ring.bw_inter, nvlink=ring.nvlink)


def _nvls_graph(
    topology: Topology,
    ranks: Sequence[int] | None,
    multi: bool,
    compcap: int,
    heads: Callable[[], ChannelPlan],
) -> Graph | None:
    try:
        plan = heads()
    except Exception:  # noqa: BLE001 - no heads: no NVLS graph (the tuner's rules decide)
        return None
    if plan.n_channels < 2:
        return None
    per = plan.bandwidth_bytes_per_s / 1e9
    if multi:
        s = _first_at_most(_speeds(SPEEDS_INTER, compcap), per)
        return Graph(plan.n_channels, s, s)
    tech = _scale_up_tech(topology, ranks)
    speeds = _speeds(SPEEDS_INTRA, compcap)
    s = _first_at_most(speeds, per * (link_efficiency(tech) if tech else 1.0))
    return Graph(plan.n_channels, s, _first_at_most(speeds, 2 * s))


def _first_at_most(speeds: Sequence[float], bw: float) -> float:
    return next((s for s in speeds if s <= bw + _EPS), speeds[-1])


def _scale_up_tech(topology: Topology, ranks: Sequence[int] | None) -> str | None:
    accs = topology.accelerators
    ids = {accs[r].id for r in (range(len(accs)) if ranks is None else ranks)}
    for ch in topology.channels:
        if ch.src in ids and str(hardware.link_tech(ch.tech).scope) == "scale-up":
            return ch.tech
    return None


def _reported_latency_us(topology: Topology, ranks: Sequence[int] | None) -> float:
    """``graph->latencyInter`` (us): the latency the network plugin reports for the NICs the
    graphs cross (search.cc line 561 takes the chosen NIC's ``net.latency``), the largest over
    the group's servers; 0 for NCCL's own InfiniBand / RoCE transport."""
    servers = set(analysis.rank_nodes(topology, ranks))
    lats = [
        hardware.nic_spec(d.type).reported_latency_s for d in topology.nics if d.node in servers
    ]
    return max(lats, default=0.0) * 1e6


def comm_channels_for(inputs: ModelInputs) -> int:
    """``comm->nChannels``: min(tree, ring) channels, doubled (connect.cc line 460)."""
    ns = [g.n_channels for a, g in inputs.graphs.items() if a in ("ring", "tree")]
    return min(MAXCHANNELS, 2 * min(ns)) if ns else 1


def model_inputs(
    topology: Topology,
    ranks: Sequence[int] | None = None,
    shape: GroupShape | None = None,
    heads: Callable[[], ChannelPlan] | None = None,
) -> ModelInputs | None:
    """NCCL's view of ``ranks`` of ``topology`` (default every accelerator); RCCL's on AMD parts
    (:func:`scaleup.tune.rccl_inputs.rccl_model_inputs`); None where the library's model does
    not apply (generic parts, no row in NCCL's tables, no RCCL node model). ``heads``: the
    group's NVLS heads when asked (default: searched here), for an owner that reads them
    elsewhere too. One rank: None, since NCCL tunes nothing there (its cost table holds Ring
    Simple at 0 and the launch is a local copy: enqueue.cc lines 1993-1996, 3039-3040)."""
    if (len(topology.accelerators) if ranks is None else len(ranks)) == 1:
        return None
    library = library_for(topology, ranks)
    if library == "rccl":
        return rccl_model_inputs(topology, ranks)
    if library != "nccl":
        return None
    accs = topology.accelerators
    chosen = accs if ranks is None else [accs[int(r)] for r in ranks]
    parts = [hardware.accelerator(a.type) for a in chosen]
    if any(str(p.vendor) != "nvidia" for p in parts):
        return None
    archs = [str(p.arch) for p in parts]
    if any(a not in ARCH_INDEX for a in archs):
        return None
    arch = min(archs, key=lambda a: ARCH_INDEX[a][1])  # minCompCap
    compcap = ARCH_INDEX[arch][1]
    shape = shape or GroupShape.of(topology, ranks)
    nnodes = len(set(analysis.rank_nodes(topology, ranks)))
    multi = nnodes > 1
    nvlink = analysis.nvlink_class(topology, ranks)
    graphs: dict[str, Graph] = {}
    ring = _ring_graph(topology, shape, multi, compcap, nvlink)
    if ring is not None:
        graphs["ring"] = ring[0]
        graphs["tree"] = _tree_graph(ring[0], ring[1], nnodes, compcap)
    capable = analysis.nvls_tree_capable if multi else analysis.nvls_capable
    if compcap >= 90 and capable(topology, ranks):
        search = heads or (lambda: nvls_heads(topology, ranks))
        nvls = _nvls_graph(topology, ranks, multi, compcap, search)
        if nvls is not None:
            graphs["nvls" if not multi else "nvls_tree"] = nvls
    if multi:
        lat = _reported_latency_us(topology, ranks)
        graphs = {a: replace(g, latency_inter_us=lat) for a, g in graphs.items()}
    nvls_nc = nvls_channel_count(topology, ranks)
    m = ModelInputs(len(chosen), nnodes, arch, graphs, nvls_channels=nvls_nc)
    comm = comm_channels_for(m)
    return ModelInputs(len(chosen), nnodes, arch, graphs, comm, nvls_channels=nvls_nc)


def nvls_channels(inputs: ModelInputs, algo: str = "nvls") -> int:
    """``comm->nvlsChannels`` (see module); NVLS (not NVLS-Tree) across nodes at most
    ``comm->nChannels`` (enqueue.cc lines 2084-2091)."""
    table = NVLS_CHANNELS[(100 if inputs.compcap >= 100 else 90, inputs.nnodes > 1)]
    nc = inputs.nvls_channels or table  # the group's (SM100 multi-node tuning), else the table
    return min(nc, inputs.comm_channels) if inputs.nnodes > 1 and algo == "nvls" else nc
