"""The channels and protocol NCCL (and RCCL) give a point-to-point transfer: not tuned, ruled.

NCCL does not time candidates for send/recv and all_to_all: each transfer's channel count and
protocol follow from the communicator and the byte count. This module reproduces that rule, so
the tuner simulates the one candidate NCCL runs at each size (:class:`P2pRule.pick`) instead of
every (protocol, channel count) pair, which is also what made a 72-rank all_to_all costly.

Per communicator (NVIDIA/nccl ``src/graph/paths.cc`` ``ncclTopoGetNchannels`` and
``ncclTopoComputeP2pChannels``, lines 920-1003; ROCm/rccl ``src/graph/paths.cc`` lines 830-935):

- channels per peer: the fewest over the peers of the pair's channels. A peer over scale-up
  links (NCCL's ``PATH_NVL``/``PATH_NVB``) gets 2 x (path bandwidth / one link's bandwidth),
  i.e. twice the links of the pair's path; RCCL doubles that again on gfx94 (CDNA3) and counts
  direct links only (no NVB). Any other local peer (PCIe) gets 2. A peer across the network gets
  max(NICs, netBw / ``NCCL_P2P_PER_CHANNEL_NET_BW`` = 14 GB/s) in NCCL; RCCL starts from 2,
  halves while 2 x nRanks > 4 x p2pnChannels, then takes at least its NIC count;
- rounded up to a power of two; NCCL on one node caps it at ``p2pnChannels``, and across nodes
  halves it while channels x ceil(nRanks / 8) > ``p2pnChannels`` (every round group in one
  wave); RCCL caps the fewest at ``p2pnChannels`` before rounding and doubles it on one gfx94
  node;
- ``nChannelsMin``: the per-peer count halved while nChannelsMin x nRanks > ``p2pnChannels``
  (nccl ``src/enqueue.cc`` line 1146, rccl line 975).

Per transfer of ``bytes`` (nccl ``addP2pToPlan``, enqueue.cc lines 913-933; rccl
``calcP2pChunkSize``, lines 941-949), with the p2p chunk size (``src/init.cc`` 830-843: 128 KiB
across nodes or over PCIe, twice that across nodes of Grace-hosted Blackwell GPUs, 512 KiB on an
all-NVLink node, at most the Simple buffer / 8; across nodes ``NCCL_P2P_NET_CHUNKSIZE`` and the
buffer ``NCCL_BUFFSIZE`` where set, as aws-ofi-nccl sets them on AWS, :mod:`scaleup.tune.ofi_env`):

- parts of at least ``chunk / 8`` (one node) or ``chunk / 2`` (several), at most ``chunk x 32``
  or ``chunk``; start from min(nChannelsMin, bytes / min part) channels, double while a part is
  above the maximum and the channels can double within the per-peer count;
- LL while bytes <= channels x ``NCCL_P2P_LL_THRESHOLD`` (16 KiB) in NCCL, while one part is
  at most 16 KiB in RCCL; Simple otherwise (p2p never runs LL128).

``p2pnChannels`` is the builder's ``p2p_channels`` (32: NCCL rounds the communicator's channel
count up to a power of two; 32 on the calibrated NVSwitch systems). ``bytes`` of an all_to_all
is one peer's block (the buffer / nRanks); of a send_recv the whole buffer.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from scaleup import hardware
from scaleup.collectives.algorithms.direct import PARAMS as DIRECT_PARAMS
from scaleup.sim.protocols import library_for
from scaleup.topology.model import NodeKind, Topology
from scaleup.topology.predicates import is_scale_up_link
from scaleup.tune.nccl_buffers import NcclBuffers
from scaleup.tune.nccl_model import ARCH_INDEX
from scaleup.tune.rules import Candidate

__all__ = ["P2P_COLLECTIVES", "P2P_LL_THRESHOLD_BYTES", "P2pRule"]

#: The collectives NCCL runs as grouped send/recv (``ncclGroupStart`` ... ``ncclGroupEnd``).
P2P_COLLECTIVES: Final = frozenset({"all_to_all", "send_recv"})
#: ``NCCL_P2P_LL_THRESHOLD`` (nccl enqueue.cc line 859; rccl enqueue.cc line 567).
P2P_LL_THRESHOLD_BYTES: Final = 16384
#: ``NCCL_P2P_PER_CHANNEL_NET_BW`` in GB/s (nccl paths.cc line 918).
P2P_PER_CHANNEL_NET_GB_PER_S: Final = 14
#: ``NCCL_P2P_NET_CHUNKSIZE``/``NCCL_P2P_PCI_CHUNKSIZE`` and ``NCCL_P2P_NVL_CHUNKSIZE``
#: (nccl init.cc lines 818-820, rccl 844-846).
P2P_NET_CHUNK_BYTES: Final = 1 << 17
P2P_PCI_CHUNK_BYTES: Final = 1 << 17
P2P_NVL_CHUNK_BYTES: Final = 1 << 19
#: Rounds per group of the p2p schedule (``NCCL_MAX_DEV_WORK_P2P_PER_BATCH``).
_ROUNDS_PER_GROUP: Final = 8
#: RCCL's gfx94 parts (CDNA3): their per-peer channel doublings (rccl paths.cc 845, 917).
_RCCL_GFX94_ARCHS: Final = frozenset({"cdna3"})


def _pow2_up(v: int) -> int:
    return 1 << max(0, int(v) - 1).bit_length()


@dataclass(frozen=True)
class P2pRule:
    """One communicator's p2p rule (see module): its library, rank count, node count, chunk
    size and channel counts."""

    library: str
    nranks: int
    multi_node: bool
    chunk_bytes: int
    per_peer_max: int
    per_peer_min: int
    p2p_channels: int

    @classmethod
    def of(
        cls,
        topology: Topology,
        ranks: Sequence[int] | None = None,
        buffers: NcclBuffers | None = None,
    ) -> P2pRule:
        """The rule of ``ranks`` (accelerator indices; default all) on ``topology``, with
        NCCL's sizes as ``buffers`` sets them (``NCCL_P2P_NET_CHUNKSIZE`` across nodes, the
        Simple slot of ``NCCL_BUFFSIZE`` as the cap; default: NCCL's)."""
        accs = topology.accelerators
        index = list(range(len(accs))) if ranks is None else [int(r) for r in ranks]
        library = library_for(topology, index)
        n = len(index)
        nodes = {int(accs[r].node) for r in index}
        multi = len(nodes) > 1
        p2p = int(DIRECT_PARAMS["p2p_channels"])
        links = _Links(topology, index)
        gfx94 = (
            library == "rccl"
            and {str(hardware.accelerator(accs[r].type).arch) for r in index} <= _RCCL_GFX94_ARCHS
        )
        fewest = links.fewest_channels(library, gfx94, n, p2p)
        if library == "rccl":
            per_peer = _pow2_up(min(p2p, fewest))
            if not multi and gfx94:
                per_peer *= 2
        else:
            per_peer = _pow2_up(fewest)
            if multi:
                groups = math.ceil(n / _ROUNDS_PER_GROUP)
                while per_peer * groups > p2p and per_peer > 1:
                    per_peer //= 2
            else:
                per_peer = min(p2p, per_peer)
        per_peer_min = per_peer
        while per_peer_min * n > p2p and per_peer_min > 1:
            per_peer_min //= 2
        buffers = buffers or NcclBuffers()
        if multi:
            chunk = buffers.p2p_net_chunk_bytes or P2P_NET_CHUNK_BYTES
            if library == "nccl" and _grace_blackwell(topology, index):
                chunk *= 2  # init.cc lines 831-834: "GBx platforms only have 4 GPUs per host"
        elif links.all_scale_up:
            chunk = P2P_NVL_CHUNK_BYTES
        else:
            chunk = P2P_PCI_CHUNK_BYTES
        chunk = min(chunk, buffers.simple_step_bytes)
        return cls(library, n, multi, chunk, per_peer, per_peer_min, p2p)

    def channels(self, nbytes: int) -> int:
        """Channels one transfer of ``nbytes`` is split over.

        >>> rule = P2pRule("nccl", 8, False, 1 << 19, 32, 4, 32)
        >>> rule.channels(0), rule.channels(1 << 16), rule.channels(128 << 20)
        (1, 1, 8)
        """
        if nbytes <= 0:
            return 1
        min_part = self.chunk_bytes // 2 if self.multi_node else self.chunk_bytes // 8
        max_part = self.chunk_bytes if self.multi_node else self.chunk_bytes * 32
        if self.library == "rccl":
            part = max(min_part, -(-nbytes // self.per_peer_min))
            nc = self.per_peer_min
            while part > max_part and nc <= self.per_peer_max // 2:
                nc *= 2
                part = -(-nbytes // nc)
            part = -(-part // min_part) * min_part  # alignUp(size, minSize)
            return max(1, -(-nbytes // part))
        nc = min(self.per_peer_min, -(-nbytes // min_part))
        part = max(min_part, -(-nbytes // nc))
        while part > max_part and nc <= self.per_peer_max // 2:
            nc *= 2
            part = -(-nbytes // nc)
        return nc

    def protocol(self, nbytes: int, channels: int) -> str:
        """LL or Simple for a transfer of ``nbytes`` over ``channels`` (see module).

        >>> P2pRule("nccl", 8, False, 1 << 19, 32, 4, 32).protocol(16384, 1)
        'll'
        >>> P2pRule("rccl", 8, False, 1 << 19, 32, 4, 32).protocol(65536, 2)
        'simple'
        """
        if self.library == "rccl":
            part = -(-nbytes // max(1, channels))
            return "ll" if part <= P2P_LL_THRESHOLD_BYTES else "simple"
        return "ll" if nbytes <= channels * P2P_LL_THRESHOLD_BYTES else "simple"

    def peer_bytes(self, collective: str, nbytes: int) -> int:
        """One transfer's bytes: an all_to_all's block per peer, a send_recv's buffer."""
        return nbytes // self.nranks if collective == "all_to_all" else nbytes

    def pick(self, collective: str, cand: Candidate, nbytes: int) -> Candidate:
        """The candidate NCCL runs for ``cand`` at ``nbytes``: a ``direct`` p2p candidate takes
        the rule's channels and protocol; any other is returned as it is."""
        if cand.algorithm != "direct" or collective not in P2P_COLLECTIVES:
            return cand
        peer = self.peer_bytes(collective, nbytes)
        nc = self.channels(peer)
        return Candidate("direct", self.protocol(peer, nc), nc)


class _Links:
    """The scale-up and network links of a group, as the channel count of a peer needs them."""

    def __init__(self, topology: Topology, index: list[int]) -> None:
        accs = topology.accelerators
        self.ids = [accs[r].id for r in index]
        member = set(self.ids)
        self.direct: dict[str, dict[str, int]] = {a: {} for a in self.ids}
        self.switch_links: dict[str, int] = dict.fromkeys(self.ids, 0)
        #: each rank's NICs, and a NIC's bandwidth into the network (its widest switch channel)
        self.nic_ids: dict[str, list[str]] = {a: [] for a in self.ids}
        self.nic_bw: dict[str, float] = {}
        for c in topology.channels:
            src, dst = topology.device(c.src), topology.device(c.dst)
            if c.src in member:
                if dst.kind is NodeKind.NIC:
                    self.nic_ids[c.src].append(c.dst)
                elif is_scale_up_link(c.tech) and dst.kind is NodeKind.ACCELERATOR:
                    self.direct[c.src][c.dst] = self.direct[c.src].get(c.dst, 0) + c.count
                elif is_scale_up_link(c.tech) and dst.kind is NodeKind.SWITCH:
                    self.switch_links[c.src] += c.count
            elif src.kind is NodeKind.NIC and dst.kind is NodeKind.SWITCH:
                self.nic_bw[c.src] = max(self.nic_bw.get(c.src, 0.0), c.bandwidth_bytes_per_s)
        self.by_node: dict[int, list[str]] = {}
        for r in index:
            self.by_node.setdefault(int(accs[r].node), []).append(accs[r].id)
        self.all_scale_up = all(self._node_all_scale_up(m) for m in self.by_node.values())

    def _switched(self, members: list[str]) -> bool:
        return all(self.switch_links[a] > 0 for a in members)

    def _node_all_scale_up(self, members: list[str]) -> bool:
        """Whether every pair of a node's ranks is joined by scale-up links (NCCL's
        ``isAllNvlink``): through switches, directly, or over one intermediate rank."""
        if len(members) < 2 or self._switched(members):
            return True
        return all(
            self._local_links(a, b, nvb=True) > 0 for a in members for b in members if a != b
        )

    def _local_links(self, a: str, b: str, *, nvb: bool) -> int:
        """Links of the widest scale-up path a -> b (0: none): direct, through the switches,
        or (``nvb``) through one other rank."""
        best = self.direct[a].get(b, 0)
        if self.switch_links[a] and self.switch_links[b]:
            best = max(best, min(self.switch_links[a], self.switch_links[b]))
        if nvb and best == 0:
            for m, count in self.direct[a].items():
                best = max(best, min(count, self.direct.get(m, {}).get(b, 0)))
        return best

    def fewest_channels(self, library: str, gfx94: bool, nranks: int, p2p: int) -> int:
        """The fewest channels ``ncclTopoGetNchannels`` gives any pair of the group."""
        fewest: int | None = None
        per_link = 4 if gfx94 else 2
        for members in self.by_node.values():
            if len(members) < 2:
                continue
            if self._switched(members):  # every pair through the switches: the thinnest rank
                links = min(self.switch_links[a] for a in members)
                fewest = _min(fewest, per_link * max(1, links))
                continue
            for a in members:
                for b in members:
                    if a == b:
                        continue
                    links = self._local_links(a, b, nvb=library != "rccl")
                    fewest = _min(fewest, per_link * links if links else 2)
                    if fewest <= 2:
                        return fewest
        if len(self.by_node) > 1:
            for a in self.ids:
                fewest = _min(fewest, self._net_channels(a, library, nranks, p2p))
        return 1 if fewest is None else fewest

    def _net_channels(self, a: str, library: str, nranks: int, p2p: int) -> int:
        """A network peer's channels for rank ``a`` (see module)."""
        nics = self.nic_ids[a]
        if library == "rccl":
            nc = 2
            while nc * nranks > p2p * 4 and nc > 1:
                nc //= 2
            return max(len(nics) or 1, nc)
        if not nics:
            return 2
        gb_per_s = sum(self.nic_bw.get(n, 0.0) for n in nics) / 1e9
        return max(len(nics), math.ceil(int(gb_per_s) / P2P_PER_CHANNEL_NET_GB_PER_S))


def _min(a: int | None, b: int) -> int:
    return b if a is None else min(a, b)


def _grace_blackwell(topology: Topology, index: Sequence[int]) -> bool:
    """Whether every rank is a Blackwell-or-later GPU hosted over NVLink-C2C (a Grace CPU: NCCL's
    ``cpuArch == NCCL_TOPO_CPU_ARCH_ARM && minCompCap >= 100``, NCCL 2.30.7 init.cc line 833)."""
    accs = topology.accelerators
    for r in index:
        spec = hardware.accelerator(accs[r].type)
        compcap = ARCH_INDEX.get(str(spec.arch), (0, 0))[1]
        if compcap < 100 or str(spec.host_link.family) != "c2c":
            return False
    return True
