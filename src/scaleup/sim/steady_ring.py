"""Ring collectives in steady state: every hop of every lane active at once, one solve per phase.

Why. The event loop (:mod:`scaleup.sim.run`) pays one fair-share solve per batch of events. A
ring whose channels are images of one another under a rotation of the fabric is timed from its
representatives (:class:`~scaleup.sim.pattern.RingPattern`) and its lanes step in lockstep; one
without that symmetry is not. NCCL's rings over two NVL72 racks (18 channels on 72 GPUs a rack:
channel ``c`` runs rack 0 from GPU ``c``) are such rings: their chains drift apart, almost every
transfer ends at its own instant, and one size takes ~200,000 solves (over 20 minutes on 144
GPUs; 1,440 GPUs cannot be built at all). This module times such a ring without events.

What it computes: the event loop's ring (:mod:`scaleup.collectives.algorithms.ring`: a block's
chain of hops, each hop waiting for the previous one to end and then paying its step latency,
then its bytes at its fair rate) with the rates held at their steady state:

- **Rates.** For each phase (the reduce hops of a reduce-scatter, the copy hops of an
  all-gather) one max-min fair solve over the lanes, each lane one variable whose column is the
  sum of its ``n`` hops' columns (route channels and HBMs, as
  :func:`~scaleup.sim.binding.usage_columns` builds them, and each sender's thread block): once
  a ring is full every hop of a lane moves the lane's bytes at the same rate, since a hop cannot
  forward faster than it receives. Thread-block caps, link efficiency and protocol payload
  efficiency are those of the event loop (same columns, same capacities).
- **Time.** Launch (host launch plus the protocol's base latency), then, for the slowest lane,
  the longest chain's step latencies (a block's ``n - 1`` hops per phase, each paying its link
  class's step latency and its route's latency) plus ``n - 1`` blocks per phase at the lane's
  phase rate (each link carries ``n - 1`` blocks of each phase one after another).

What it leaves out, and why it is labelled an approximation (``SimResult.model`` is
``"steady"``): the fill and drain, where fewer hops are active and the active ones go faster;
and the drift, where blocks queue behind a slow hop and share its link with the next step's
blocks. Both are second order where the bandwidth term dominates. The local copies that seed the
chains (one block through HBM) are left out too. docs/models.md ("Rings in steady state")
compares it with the event loop where both run.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import scipy.sparse as sp

from scaleup import hardware
from scaleup.arrays import unique
from scaleup.collectives.algorithms.ring import Lanes, chain_starts
from scaleup.errors import UsageError
from scaleup.sim import params as P
from scaleup.sim.binding import usage_columns
from scaleup.sim.fairshare import maxmin
from scaleup.sim.graph_channels import graph_channel_caps, network_cta_use
from scaleup.sim.network import LINK_CLASSES, Network
from scaleup.sim.protocols import Protocol, for_topology, host_launch_s
from scaleup.sim.timeline import SimResult
from scaleup.topology.model import Topology

__all__ = ["STEADY_COLLECTIVES", "SteadyRing", "servers_relay"]

#: The ring collectives timed here, and their phases (True: a reduce hop, False: a copy hop).
STEADY_COLLECTIVES: dict[str, tuple[bool, ...]] = {
    "all_reduce": (True, False),
    "reduce_scatter": (True,),
    "all_gather": (False,),
}


def servers_relay(network: Network, ranks: np.ndarray) -> bool:
    """Whether some pair of accelerators of one server is joined only through a third memory
    (a torus or partial mesh relaying through a chip, a host staging): checked from each
    server's first rank to the server's others. The steady state is used only where no pair
    is: on switched and fully meshed servers it is within a few percent of the event loop, on
    tori 12-26% off it (docs/models.md section 21)."""
    accs = network.topology.accelerators
    node = np.array([accs[int(r)].node for r in ranks.tolist()])
    routes = network.routes
    for server in unique(node).tolist():
        members = ranks[node == server].tolist()
        for other in members[1:]:
            route = routes[network.transfer_route(members[0], other, reduce=False)]
            if len(route.mem_rows) > 2:
                return True
    return False


@dataclass(frozen=True)
class _Phase:
    """One phase's lane rates (payload bytes/s), hop latencies (lanes x positions, s), the
    payload each lane puts on each constraint per byte of its blocks (for the byte accounting),
    the accelerator of each thread block (its constraint follows the fabric's) and its
    constraint's name."""

    rate: np.ndarray
    latency: np.ndarray
    carried: sp.csr_array
    cta_rank: np.ndarray
    cta_names: tuple[str, ...]


class SteadyRing:
    """A ring collective's lanes bound to a fabric: routes and one fair-share solve per phase
    and protocol, reused for every size.

    Parameters
    ----------
    collective
        ``all_reduce``, ``reduce_scatter`` or ``all_gather``.
    lanes
        The ring's lanes (:func:`scaleup.collectives.algorithms.ring.lanes`, one chunk).
    topology, ranks, network
        The fabric, the accelerator of every rank, and the network the routes are added to.
    params
        The ring's builder parameters, for NCCL's per-graph-channel caps
        (:mod:`scaleup.sim.graph_channels`: ``graph_channels``, ``channels``); default none.
    """

    def __init__(
        self, collective: str, lanes: Lanes, topology: Topology, ranks: np.ndarray,
        network: Network, params: Mapping[str, Any] | None = None,
    ) -> None:  # fmt: skip
        if collective not in STEADY_COLLECTIVES:
            raise UsageError(
                f"the steady-state ring times {', '.join(STEADY_COLLECTIVES)}, not {collective}",
                source="collective",
            )
        if len(set(lanes.chunk.tolist())) != 1:
            raise UsageError("the steady-state ring takes one chunk per lane", source="chunks")
        self.collective = collective
        self.lanes = lanes
        self.topology = topology
        self.ranks = np.asarray(ranks, dtype=np.int64)
        self.net = network
        self.params: Mapping[str, Any] = params or {}
        self.n = lanes.orders.shape[1]
        self._phases: dict[tuple[str, bool], _Phase] = {}

    def _phase(self, proto: Protocol, reduce: bool) -> _Phase:
        """Rates and latencies of one phase for ``proto`` (adapted to the fabric's library)."""
        hit = self._phases.get((proto.name, reduce))
        if hit is not None:
            return hit
        ln, n, net = self.lanes, self.n, self.net
        n_lanes = len(ln)
        src = self.ranks[ln.orders]
        dst = self.ranks[np.roll(ln.orders, -1, axis=1)]
        pairs: dict[tuple[int, int], int] = {}
        route = np.empty((n_lanes, n), dtype=np.int64)
        for lane in range(n_lanes):
            for pos in range(n):
                key = (int(src[lane, pos]), int(dst[lane, pos]))
                rid = pairs.get(key)
                if rid is None:
                    rid = pairs[key] = net.transfer_route(*key, reduce=reduce)
                route[lane, pos] = rid
        # one thread block per (sender, channel), as the event loop's variables have
        cta_code = src * (int(ln.channel.max()) + 1) + ln.channel[:, None]
        cta_uniq, cta_of = np.unique(cta_code, return_inverse=True)
        cta_rank = cta_uniq // (int(ln.channel.max()) + 1)
        accs = self.topology.accelerators
        cta_cap = np.array([proto.cta_bytes_per_s(str(hardware.accelerator(accs[int(r)].type).arch))
                            for r in cta_rank.tolist()])  # fmt: skip
        shared = graph_channel_caps(
            "ring", self.params, proto.name, proto.library, self.topology,
            self.ranks, cta_rank, cta_uniq % (int(ln.channel.max()) + 1),
        )  # fmt: skip
        cta_use = network_cta_use(shared, cta_cap, cta_of.ravel(), route.ravel(), net.routes)
        col_ptr, row, use, car = usage_columns(net, route.ravel(), cta_of.ravel(), proto, cta_use)
        lane_of_entry = np.repeat(np.repeat(np.arange(n_lanes), n), np.diff(col_ptr))
        n_con = net.n_constraints + len(cta_uniq)
        usage = sp.csr_array((use, (row, lane_of_entry)), shape=(n_con, n_lanes))
        weighted = np.zeros(len(cta_uniq), dtype=bool)
        if cta_use is not None:
            weighted[cta_of.ravel()[cta_use > 1.0]] = True
        names = tuple(
            f"r{int(r)}.{'graph-channel' if w else 'cta'}"
            for r, w in zip(cta_rank.tolist(), weighted.tolist(), strict=True)
        )
        capacity = np.r_[net.capacity, cta_cap]
        used = np.flatnonzero(np.diff(usage.indptr) > 0)
        rate = maxmin(usage[used].toarray(), capacity[used])
        routes = net.routes
        step = np.array([proto.step_latency_s.get(c, 0.0) for c in LINK_CLASSES])
        step[LINK_CLASSES.index("switch")] = P.SWITCH_STEP_LATENCY_S
        lat_of = {
            rid: step[routes[rid].link_class] + routes[rid].latency_s for rid in pairs.values()
        }
        latency = np.vectorize(lat_of.__getitem__, otypes=[float])(route)
        carried = sp.csr_array(
            (car, (row, lane_of_entry)), shape=(n_con, n_lanes)
        )  # payload per byte of each lane's hops, summed over its n hops
        out = self._phases[(proto.name, reduce)] = _Phase(rate, latency, carried, cta_rank, names)
        return out

    def run(self, proto: Protocol, block_bytes: np.ndarray, nbytes: float) -> SimResult:
        """The collective's time for ``proto`` with ``block_bytes[lane]`` bytes in each op of a
        lane (a block: the lane's share over ``n``), as a :class:`SimResult` without ops
        (``nbytes``: the collective's size, for the result)."""
        proto = for_topology(proto, self.topology, self.ranks)
        n, ln = self.n, self.lanes
        block = np.asarray(block_bytes, dtype=float)
        starts = chain_starts(self.collective, ln, n).reshape(len(ln), n)
        phases = STEADY_COLLECTIVES[self.collective]
        hops = n - 1
        chain = np.zeros((len(ln), n))  # per lane and block: its chain's step latencies
        move = np.zeros(len(ln))  # per lane: its blocks' bytes over its rates
        con_bytes = None
        ph = None
        for i, reduce in enumerate(phases):
            ph = self._phase(proto, reduce)
            # all_reduce's all-gather chain of block j starts one position before its
            # reduce-scatter chain (the ring builder's ag_ranks)
            first = starts - 1 if (self.collective == "all_reduce" and i == 1) else starts
            window = _window_sums(ph.latency, hops)
            chain += np.take_along_axis(window, first % n, axis=1)
            move += hops * block / ph.rate
            moved = ph.carried @ (hops * block)
            con_bytes = moved if con_bytes is None else con_bytes + moved
        launch = host_launch_s(self.topology) + proto.launch_latency_s
        time_s = float(launch + (chain.max(axis=1) + move).max())
        assert con_bytes is not None  # noqa: S101 - every collective has a phase
        assert ph is not None  # noqa: S101 - likewise
        n_ch = self.net.n_channels
        busy = np.where(con_bytes > 0, time_s - launch, 0.0)
        cta_names = ph.cta_names
        return SimResult(
            time_s=time_s, op_start_s=np.zeros(0), op_end_s=np.zeros(0),
            op_rank=np.zeros(0, dtype=np.int64), op_channel=np.zeros(0, dtype=np.int64),
            channel_bytes=con_bytes[:n_ch], channel_busy_s=busy[:n_ch],
            constraint_names=self.net.constraint_names + cta_names, constraint_bytes=con_bytes,
            constraint_busy_s=busy, protocol=proto.name, topology=self.topology.name,
            algorithm="ring", nbytes=float(nbytes), n_events=0,
            channel_names=self.net.constraint_names[:n_ch], model="steady",
        )  # fmt: skip


def _window_sums(values: np.ndarray, width: int) -> np.ndarray:
    """Per row, the sums of ``width`` consecutive entries starting at every position, wrapping
    around (a chain of ``width`` hops starting there)."""
    n = values.shape[1]
    reps = width // n + 2
    cum = np.concatenate([np.zeros((len(values), 1)), np.cumsum(np.tile(values, reps), axis=1)],
                         axis=1)  # fmt: skip
    idx = np.arange(n)
    return cum[:, idx + width] - cum[:, idx]
