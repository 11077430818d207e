"""The capacities around one group of ranks that the tuner's lower bounds divide by.

Split from :mod:`scaleup.tune.bounds` (which re-exports :class:`GroupFabric` and explains the
bounds) so that reading a group's cuts off a topology -- per-rank channels in and out, NVLS
switch links, each server's channels across its boundary -- stands on its own.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from scaleup import hardware
from scaleup.sim.network import Network
from scaleup.topology.model import NodeKind, Topology

__all__ = ["GroupFabric"]


@dataclass(frozen=True, eq=False)
class GroupFabric:
    """Capacities (payload bytes/s at protocol efficiency 1) around one group of ranks.

    ``egress``/``ingress``: per rank, its accelerator's channels out/in; ``nvls_out``/``nvls_in``:
    per rank, its channels to/from switches with in-switch reduction; ``node_of_rank``: each
    rank's server as an index into ``node_out``/``node_in``, the channels leaving/entering the
    devices of that server. ``peer_access`` False: transfers are host-staged over virtual links,
    so only the thread-block and latency terms hold.
    """

    nranks: int
    egress: np.ndarray
    ingress: np.ndarray
    nvls_out: np.ndarray
    nvls_in: np.ndarray
    node_of_rank: np.ndarray
    node_out: np.ndarray
    node_in: np.ndarray
    archs: tuple[str, ...]
    peer_access: bool

    @classmethod
    def of(
        cls, topology: Topology, group: Sequence[int] | None, network: Network | None = None
    ) -> GroupFabric:
        """The capacities of ``group`` (accelerator indices; None: all) on ``topology``."""
        net = Network(topology) if network is None else network
        accs = topology.accelerators
        ranks = np.arange(len(accs)) if group is None else np.asarray(group, dtype=np.int64)
        dev = net.acc_devices[ranks]
        cap, src, dst = net.ch_capacity, net.ch_src, net.ch_dst
        n_dev = net.n_devices
        out_dev = np.bincount(src, weights=cap, minlength=n_dev)
        in_dev = np.bincount(dst, weights=cap, minlength=n_dev)
        devices = topology.devices
        nvls = np.array([d.kind is NodeKind.SWITCH
                         and bool(hardware.switch_chip(d.type).in_switch_reduction)
                         for d in devices])  # fmt: skip
        nvls_out = np.bincount(src, weights=cap * nvls[dst], minlength=n_dev)
        nvls_in = np.bincount(dst, weights=cap * nvls[src], minlength=n_dev)
        node_dev = np.array([int(d.node) for d in devices], dtype=np.int64)
        nodes, node_of_rank = np.unique(node_dev[dev], return_inverse=True)
        where = np.searchsorted(nodes, node_dev)
        member = (where < len(nodes)) & (nodes[np.minimum(where, len(nodes) - 1)] == node_dev)
        dev_node = np.where(member, where, -1)
        cross = dev_node[src] != dev_node[dst]
        node_out = np.bincount(
            dev_node[src][cross & (dev_node[src] >= 0)],
            weights=cap[cross & (dev_node[src] >= 0)], minlength=len(nodes),
        )  # fmt: skip
        node_in = np.bincount(
            dev_node[dst][cross & (dev_node[dst] >= 0)],
            weights=cap[cross & (dev_node[dst] >= 0)], minlength=len(nodes),
        )  # fmt: skip
        archs = tuple(sorted({str(hardware.accelerator(accs[int(r)].type).arch) for r in ranks}))
        return cls(
            len(ranks), out_dev[dev], in_dev[dev], nvls_out[dev], nvls_in[dev],
            node_of_rank.astype(np.int64), node_out, node_in, archs, bool(topology.peer_access),
        )  # fmt: skip

    @property
    def n_nodes(self) -> int:
        return len(self.node_out)
