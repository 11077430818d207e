"""The tuner: which (algorithm, protocol, channel count) NCCL would pick, found by simulating.

NCCL picks the (algorithm, protocol) of least *modelled* time among the enabled ones
(``enqueue.cc`` calling ``ncclTopoGetAlgoTime``) and the channel count from its graph search. This
tuner applies NCCL's enable rules (prior-art §4.3) and then *simulates* every enabled candidate
with :func:`scaleup.sim.simulate`, so its choice is never slower than another candidate it knows:

- ``nvls`` only where every rank hangs off switches with in-switch reduction (NVLink SHARP), all
  inside one switch domain (one server, or one NVL72 rack), and only with the ``simple`` protocol
  (NVLS/NVLSTree are Simple-only in NCCL);
- ``ll128`` only on NVLink-class paths (NCCL enables it up to NVB intra-node paths, never over
  PCIe-only or host-staged paths);
- ``hierarchical`` only when the ranks span more than one server;
- ``ring``, ``tree``, ``direct``, ``recursive`` and the other registered algorithms wherever the
  algorithm library supports the collective and the world size;
- channel counts 1, 2, 4, ... up to the number of scale-up links of an accelerator (NCCL builds
  at most one ring per link's worth of bandwidth; 18 NVLinks -> up to 16 channels), capped at 32.

Speed. :func:`tune_sweep` tunes ascending sizes with branch and bound over two lower bounds of a
candidate's time at size S: its simulated time at a smaller size (a bigger message never finishes
sooner on the same schedule shape), and the simulator's congestion bound (launch latency plus the
bytes each channel, HBM and thread block must carry over its capacity; ``lower_bound_s``).
Candidates are simulated cheapest bound first; one whose bound reaches the best time found at
this size is not simulated. Schedules are built once per (algorithm, count,
channels, chunks) and simulated under every protocol; simulations are cached per topology.
:func:`tune` (one size) simulates every candidate.
"""

from __future__ import annotations

import functools
import math
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from scaleup.collectives.spec import BLOCKED_COLLECTIVES, CollectiveSpec, numpy_dtype
from scaleup.errors import ScheduleError, SimulationError, UsageError
from scaleup.topology.model import NodeKind, Topology

__all__ = [
    "CHUNK_BYTES",
    "MAX_CHANNELS",
    "NCCL_ALGORITHMS",
    "MAX_PIPELINE_CHUNKS",
    "PROTOCOLS",
    "REFERENCE_BLOCKS",
    "VERIFY_MAX_OPS",
    "Candidate",
    "TunedChoice",
    "candidates",
    "channel_counts",
    "chunks_for",
    "count_for",
    "enabled_algorithms",
    "enabled_protocols",
    "mesh_ring_orders",
    "tune",
    "tune_sweep",
]

#: Algorithms NCCL has (ring, tree, nvls; CollNet/PAT if the library grows them). ``hierarchical``
#: stands for NCCL's multi-node compositions (NVLSTree, tree across nodes, ring within).
NCCL_ALGORITHMS = frozenset({"ring", "tree", "nvls", "collnet", "pat", "hierarchical"})
#: Protocols as NCCL spells them (order: NCCL's tables order LL, LL128, Simple).
PROTOCOLS = ("ll", "ll128", "simple")
#: NCCL_MAX_NCHANNELS-like cap on the channel counts tried.
MAX_CHANNELS = 32
#: Bytes one pipeline step moves per channel, per protocol (NCCL's per-step buffer slot:
#: Simple 4 MiB buffer / NCCL_STEPS 8 = 512 KiB; LL 256 KiB of data / 8 = 32 KiB; LL128 about
#: 600 KB / 8 ~ 64 KiB of data; ``src/include/device.h``, ``DEFAULT_*_BUFFSIZE``).
CHUNK_BYTES = {"simple": 512 * 1024, "ll": 32 * 1024, "ll128": 64 * 1024}
#: Pipelined algorithms (tree, chains) are cut into at most this many chunks per channel: enough to
#: amortise the pipeline fill (within 1/16 of the streaming time), few enough to keep schedules
#: small at 8 GB.
MAX_PIPELINE_CHUNKS = 16
#: Schedules with more ops than this at the verification count are not replayed on numpy before
#: use: replay is O(ops) in Python and would dominate a sweep; the algorithm builders are verified
#: for world sizes 1..16 by their own property tests and the structure does not depend on count.
VERIFY_MAX_OPS = 20_000
#: Elements per (rank, channel, chunk) block of the reference schedule that sizes are scaled from.
REFERENCE_BLOCKS = 1024

#: (algorithm, collective) pairs whose time benefits from cutting the message into a pipeline.
_PIPELINED = {
    ("tree", "all_reduce"),
    ("tree", "broadcast"),
    ("tree", "reduce"),
    ("ring", "broadcast"),
    ("ring", "reduce"),
    ("hierarchical", "all_reduce"),  # chunk c crosses the nodes while chunk c+1 is reduced inside
}


@dataclass(frozen=True, order=True)
class Candidate:
    """One (algorithm, protocol, channel count) the tuner may choose."""

    algorithm: str
    protocol: str
    channels: int


@dataclass(frozen=True)
class TunedChoice:
    """The tuner's answer for one collective at one size.

    ``result`` is the :class:`~scaleup.sim.SimResult` of the chosen schedule; ``time_s`` its time.
    ``considered`` lists ``(candidate, time_s)`` for every candidate simulated at this size.
    """

    algorithm: str
    protocol: str
    channels: int
    chunks: int
    time_s: float
    result: Any
    considered: tuple[tuple[Candidate, float], ...] = field(default=(), repr=False, compare=False)


# -- sizes and counts ------------------------------------------------------------------------


def count_for(collective: str, nbytes: int, itemsize: int, nranks: int) -> int:
    """nccl-tests' element count for a size: ``bytes // itemsize``, truncated to a multiple of
    ``nranks`` for the blocked collectives (all_gather, reduce_scatter, all_to_all).

    >>> count_for("all_gather", 100, 4, 8)
    24
    >>> count_for("all_reduce", 100, 4, 8)
    25
    """
    count = int(nbytes) // int(itemsize)
    if collective in BLOCKED_COLLECTIVES:
        count = (count // nranks) * nranks
    return count


def chunks_for(algorithm: str, collective: str, nbytes: int, channels: int, protocol: str) -> int:
    """Pipeline depth: one chunk per protocol step slot of each channel's share, for pipelined
    algorithms (tree, chain broadcast/reduce), capped at :data:`MAX_PIPELINE_CHUNKS`; else 1."""
    if (algorithm, collective) not in _PIPELINED:
        return 1
    per_channel = nbytes / max(channels, 1)
    want = max(1, math.ceil(per_channel / CHUNK_BYTES[protocol]))
    return int(min(MAX_PIPELINE_CHUNKS, 1 << (want - 1).bit_length()))  # a power of two


# -- enable rules ------------------------------------------------------------------------------


def _rank_devices(topology: Topology, ranks: Sequence[int] | None) -> list[Any]:
    accs = topology.accelerators
    return list(accs) if ranks is None else [accs[r] for r in ranks]


def _neighbours(topology: Topology, device_id: str) -> list[tuple[str, Any]]:
    return [(c.dst, c) for c in topology.channels if c.src == device_id]


def nvls_capable(topology: Topology, ranks: Sequence[int] | None = None) -> bool:
    """Whether NVLink SHARP applies: every rank links only to in-switch-reduction switches (besides
    host/NIC links), all ranks in one server or switch domain, peer access on."""
    from scaleup.hardware import switch_chip

    if not topology.peer_access:
        return False
    devices = _rank_devices(topology, ranks)
    if len({d.node for d in devices}) > 1:
        return False
    for dev in devices:
        neighbours = [topology.device(dst) for dst, _ in _neighbours(topology, dev.id)]
        specs = [switch_chip(d.type) for d in neighbours if d.kind is NodeKind.SWITCH]
        nvlink = [
            s for s in specs if (s.link_tech or "").startswith("nvlink")
        ]  # not PCIe/host side
        if not nvlink or not all(s.in_switch_reduction for s in nvlink):
            return False
    return True


def _full_mesh(topology: Topology, ranks: Sequence[int] | None = None) -> bool:
    accs = _rank_devices(topology, ranks)
    index = topology.channel_index
    return len(accs) > 2 and all((a.id, b.id) in index for a in accs for b in accs if a.id != b.id)


def nvlink_class(topology: Topology, ranks: Sequence[int] | None = None) -> bool:
    """Whether every rank reaches its peers over NVLink (NCCL's LL128 enable rule)."""
    if not topology.peer_access:
        return False
    for dev in _rank_devices(topology, ranks):
        techs = {c.tech for _, c in _neighbours(topology, dev.id)}
        if not any(t.startswith("nvlink") for t in techs):
            return False
    return True


def links_per_accelerator(topology: Topology, ranks: Sequence[int] | None = None) -> int:
    """Fewest scale-up links (counted with multiplicity) any rank has."""
    fewest = None
    for dev in _rank_devices(topology, ranks):
        n = sum(
            c.count
            for _, c in _neighbours(topology, dev.id)
            if not c.tech.startswith(("pcie", "ib-", "eth-", "c2c", "upi"))
        )
        fewest = n if fewest is None else min(fewest, n)
    return int(fewest or 0)


def channel_counts(topology: Topology, ranks: Sequence[int] | None = None) -> tuple[int, ...]:
    """Channel counts tried: 1, 2, 4, ... up to the links of one accelerator (at least 1, 2).

    On a full mesh each ring covers one link per direction, so one ring per link (n - 1) and two
    channels per ring are tried too; behind a switch every ring spreads over all links already."""
    links = links_per_accelerator(topology, ranks)
    top = min(MAX_CHANNELS, max(2, links))
    counts = [1]
    while counts[-1] * 2 <= top:
        counts.append(counts[-1] * 2)
    if _full_mesh(topology, ranks):
        # one ring per link (n - 1 directed rings) and two channels per ring, as RCCL runs
        # several channels per ring on xGMI meshes where one thread block cannot fill a link
        rings = len(_rank_devices(topology, ranks)) - 1
        counts += [c for c in (rings, 2 * rings) if c <= MAX_CHANNELS]
    return tuple(sorted(set(counts)))


def rail_ring_orders(nodes: Sequence[int], channels: int) -> list[list[int]] | None:
    """Ring orders for several servers that cross between servers on one rail, a new rail per
    channel, as NCCL's multi-node rings do (each channel leaves a server through another NIC).

    ``nodes[r]`` is the server of rank r. Channel k uses local index l = k mod p (p ranks per
    server): even servers run their ranks from l+1 round to l, odd servers from l back to l+1, so
    every crossing joins local index l to l (or l+1 to l+1) of the next server. None when the
    servers hold different numbers of ranks, or there is only one.

    >>> rail_ring_orders([0, 0, 1, 1], 2)
    [[1, 0, 2, 3], [0, 1, 3, 2]]
    """
    groups: dict[int, list[int]] = {}
    for rank, node in enumerate(nodes):
        groups.setdefault(int(node), []).append(rank)
    members = list(groups.values())
    p = len(members[0]) if members else 0
    if len(members) < 2 or any(len(g) != p for g in members):
        return None
    orders = []
    for k in range(channels):
        lane = k % p
        order: list[int] = []
        for i, group in enumerate(members):
            if i % 2 == 0:
                order += [group[(lane + 1 + j) % p] for j in range(p)]
            else:
                order += [group[(lane - j) % p] for j in range(p)]
        orders.append(order)
    return orders


def mesh_ring_orders(nranks: int, channels: int) -> list[list[int]]:
    """Ring orders for a full mesh, spread over distinct links as NCCL/RCCL's graph search does.

    Where the complete digraph on ``nranks`` vertices splits into ``nranks - 1`` arc-disjoint
    directed Hamiltonian cycles (every n except 4 and 6, Tillson 1980), channel k follows cycle
    ``k % (n - 1)``: the rings then use every link of every accelerator in both directions (8
    MI300X: 7 rings on 7 xGMI links). For n = 4 and 6, Walecki's n/2 - 1 undirected Hamiltonian
    cycles run both ways (all but one link per accelerator); for small odd n, coprime strides.

    >>> rings = mesh_ring_orders(8, 7)
    >>> len({(r[i], r[(i + 1) % 8]) for r in rings for i in range(8)})  # 56 arcs: all distinct
    56
    """
    cycles = _directed_cycles(nranks)
    if cycles:
        return [list(cycles[k % len(cycles)]) for k in range(channels)]
    if nranks >= 4 and nranks % 2 == 0:
        rings = []
        for cycle in _walecki_cycles(nranks):
            rings += [cycle, [cycle[0], *cycle[1:][::-1]]]  # each cycle both ways round
        return [rings[k % len(rings)] for k in range(channels)]
    strides = [s for s in range(1, max(nranks, 2)) if math.gcd(s, nranks) == 1] or [1]
    return [
        [(i * strides[k % len(strides)]) % nranks for i in range(nranks)] for k in range(channels)
    ]


@functools.lru_cache(maxsize=64)
def _directed_cycles(n: int) -> tuple[tuple[int, ...], ...]:
    """``n - 1`` arc-disjoint directed Hamiltonian cycles of the complete digraph K_n*, found by
    a seeded randomised depth-first search (deterministic), or () if none is found (n = 4, 6
    have none; n > 64 is not searched)."""
    if n < 3 or n > 64 or n in (4, 6):
        return ()
    rng = random.Random(n)
    for _ in range(200):
        free = {v: set(range(n)) - {v} for v in range(n)}
        cycles: list[tuple[int, ...]] = []
        for _c in range(n - 1):
            cycle = _hamiltonian(n, free, rng)
            if cycle is None:
                break
            for a, b in zip(cycle, cycle[1:] + cycle[:1], strict=True):
                free[a].discard(b)
            cycles.append(cycle)
        if len(cycles) == n - 1:
            return tuple(cycles)
    return ()


def _hamiltonian(n: int, free: dict[int, set[int]], rng: random.Random) -> tuple[int, ...] | None:
    """A directed Hamiltonian cycle from 0 over the ``free`` arcs (bounded DFS), or None."""
    path, seen = [0], {0}
    stack = [iter(rng.sample(sorted(free[0]), len(free[0])))]
    for _ in range(50_000):
        if not stack:
            return None
        nxt = next(stack[-1], None)
        if nxt is None:
            stack.pop()
            seen.discard(path.pop())
            continue
        if nxt in seen:
            continue
        path.append(nxt)
        seen.add(nxt)
        if len(path) == n:
            if 0 in free[nxt]:
                return tuple(path)
            seen.discard(path.pop())
            continue
        stack.append(iter(rng.sample(sorted(free[nxt]), len(free[nxt]))))
    return None


def _walecki_cycles(n: int) -> list[list[int]]:
    """Walecki's decomposition of the complete graph K_n (n even) into n/2 - 1 edge-disjoint
    Hamiltonian cycles (plus a perfect matching left over): vertex n-1 is the hub, the others
    sit on a circle and cycle k zigzags k, k+1, k-1, k+2, ... around it."""
    m = n - 1
    cycles = []
    for k in range(n // 2 - 1):
        path = [k % m]
        for j in range(1, m):
            step = (j + 1) // 2
            path.append((k + step) % m if j % 2 else (k - step) % m)
        cycles.append([n - 1, *path])
    return cycles


def _library() -> Any:
    from scaleup.collectives import algorithms

    return algorithms


def enabled_algorithms(
    topology: Topology, collective: str, ranks: Sequence[int] | None = None, family: str = "nccl"
) -> list[str]:
    """Algorithms the library has for ``collective`` that NCCL's rules enable on this fabric.

    ``family="nccl"`` (default) keeps the algorithms NCCL has (:data:`NCCL_ALGORITHMS`), so the
    tuner predicts what nccl-tests prints; ``"all"`` adds ours (direct, recursive), which NCCL
    does not implement for these collectives.
    """
    lib = _library()
    devices = _rank_devices(topology, ranks)
    multi_node = len({d.node for d in devices}) > 1
    out = []
    for name in lib.algorithms_for(collective):
        if name == "nvls" and not nvls_capable(topology, ranks):
            continue
        if name == "hierarchical" and not multi_node:
            continue
        out.append(name)
    if family == "nccl":
        # our hierarchical stands for NCCL's multi-node all_reduce (tree / NVLSTree compose an
        # intra-node and an inter-node phase); NCCL's all_gather / reduce_scatter are rings
        nccl = [a for a in out if a in NCCL_ALGORITHMS
                and not (a == "hierarchical" and collective != "all_reduce")]
        return nccl or out  # all_to_all / send_recv: NCCL's p2p pairwise exchange is our direct
    if family != "all":
        raise UsageError(f"unknown algorithm family {family!r}; use nccl or all", source="--tuner")
    return out


def enabled_protocols(
    topology: Topology, algorithm: str, ranks: Sequence[int] | None = None
) -> list[str]:
    """Protocols enabled for ``algorithm``: NVLS is Simple-only; LL128 only on NVLink paths."""
    if algorithm == "nvls":
        return ["simple"]
    protos = ["ll", "simple"]
    if nvlink_class(topology, ranks):
        protos.insert(1, "ll128")
    return protos


def candidates(
    topology: Topology,
    collective: str,
    *,
    ranks: Sequence[int] | None = None,
    algo: str | None = None,
    proto: str | None = None,
    channels: int | None = None,
    family: str = "nccl",
) -> list[Candidate]:
    """Every enabled candidate, narrowed by the ``algo``/``proto``/``channels`` overrides.

    An override bypasses the enable rule it names (``--algo nvls`` on a fabric without NVLS is
    still tried, and fails if the algorithm cannot be built), as ``NCCL_ALGO`` does.
    """
    if proto is not None and proto not in PROTOCOLS:
        raise UsageError(
            f"unknown protocol {proto!r}; known: {', '.join(PROTOCOLS)}", source="proto"
        )
    if channels is not None and channels < 1:
        raise UsageError(f"channels must be >= 1, got {channels}", source="channels")
    if algo is not None:
        known = _library().algorithms_for(collective)
        if algo not in known:
            raise UsageError(
                f"algorithm {algo!r} does not implement {collective}; known: {', '.join(known)}",
                source="algo",
            )
        algos = [algo]
    else:
        algos = enabled_algorithms(topology, collective, ranks, family)
    counts = (channels,) if channels is not None else channel_counts(topology, ranks)
    out = []
    for a in algos:
        protos = [proto] if proto is not None else enabled_protocols(topology, a, ranks)
        out.extend(Candidate(a, p, c) for p in protos for c in counts)
    return out


# -- simulation with caches ----------------------------------------------------------------------


@dataclass
class _Context:
    """Caches for one (topology, collective, ranks, dtype, redop, root).

    Each (algorithm, channels, chunks) is built once at a reference count divisible by all its
    blocks and compiled once (:func:`scaleup.sim.compile_schedule`); a size is then timed by
    scaling every op's count (``CompiledSchedule.run(scale=)``), exact where the size's count
    divides like the reference and within a fraction of an element per op otherwise. Count 0
    (nccl-tests' size-0 rows) runs the structure with zero bytes: launch and step latency only,
    as NCCL still launches the kernel.
    """

    topology: Topology
    collective: str
    ranks: tuple[int, ...] | None
    nranks: int
    dtype: str
    redop: str
    root: int
    compiled: dict[tuple[str, int, int], Any] = field(default_factory=dict)
    results: dict[tuple[Candidate, int], tuple[float, int, Any]] = field(default_factory=dict)
    failed: dict[tuple[str, int, int], str] = field(default_factory=dict)

    def spec(self, count: int) -> CollectiveSpec:
        return CollectiveSpec(self.collective, self.nranks, count, root=self.root, redop=self.redop)

    def reference_count(self, channels: int, chunks: int) -> int:
        return self.nranks * channels * chunks * REFERENCE_BLOCKS

    def build(self, algorithm: str, count: int, channels: int, chunks: int) -> Any:
        return _library().build_schedule(
            algorithm,
            self.spec(count),
            channels=channels,
            chunks=chunks,
            **self._params(algorithm, channels),
        )

    def compiled_for(self, algorithm: str, channels: int, chunks: int) -> Any:
        key = (algorithm, channels, chunks)
        if key not in self.compiled:
            from scaleup.sim import compile_schedule

            schedule = self.build(
                algorithm, self.reference_count(channels, chunks), channels, chunks
            )
            self.compiled[key] = compile_schedule(schedule, self.topology, ranks=self.ranks)
        return self.compiled[key]

    def _params(self, algorithm: str, channels: int = 1) -> dict[str, Any]:
        if algorithm == "hierarchical":
            return {"ranks_per_node": self.topology.ranks_per_node}
        if algorithm == "ring" and self.full_mesh:
            return {"orders": mesh_ring_orders(self.nranks, channels)}
        if algorithm == "ring" and self.rail_orders_base is not None:
            return {"orders": rail_ring_orders(self.rail_orders_base, channels)}
        return {}

    @functools.cached_property
    def rail_orders_base(self) -> tuple[int, ...] | None:
        """The server of every rank, when the ranks span several servers evenly (else None)."""
        nodes = tuple(int(d.node) for d in _rank_devices(self.topology, self.ranks))
        if len(set(nodes)) < 2 or rail_ring_orders(nodes, 1) is None:
            return None
        return nodes

    def _orders_key(self, algorithm: str, channels: int) -> tuple[tuple[int, ...], ...] | None:
        orders = self._params(algorithm, channels).get("orders")
        return None if orders is None else tuple(tuple(o) for o in orders)

    @functools.cached_property
    def full_mesh(self) -> bool:
        """Every pair of ranks directly linked, no switch between them (MI300X)."""
        return _full_mesh(self.topology, self.ranks)

    def simulate(self, cand: Candidate, nbytes: int, count: int) -> tuple[float, int, Any] | None:
        """(time_s, chunks, SimResult) of one candidate, or None if it cannot be built/verified."""
        key = (cand, count)
        if key in self.results:
            return self.results[key]
        chunks = chunks_for(cand.algorithm, self.collective, nbytes, cand.channels, cand.protocol)
        bad_key = (cand.algorithm, cand.channels, chunks)
        if bad_key in self.failed:
            return None
        try:
            # Channels and chunks are independent lanes of one structure: two of each exercise
            # every cross-lane dependency, so the check is cached at min(., 2).
            verified(
                self.collective,
                cand.algorithm,
                self.nranks,
                min(cand.channels, 2),
                min(chunks, 2),
                self.redop,
                self.root,
                self._params(cand.algorithm).get("ranks_per_node", 0),
                self._orders_key(cand.algorithm, min(cand.channels, 2)),
            )
            compiled = self.compiled_for(cand.algorithm, cand.channels, chunks)
            scale = count / self.reference_count(cand.channels, chunks)
            result = compiled.run(cand.protocol, dtype=self.dtype, scale=scale)
        except (
            ScheduleError,
            SimulationError,
        ) as error:  # unsupported or wrong here: never trusted
            self.failed[bad_key] = error.one_line()
            return None
        entry = (float(result.time_s), chunks, result)
        self.results[key] = entry
        return entry

    def lower_bound_s(self, cand: Candidate, count: int) -> float:
        """A lower bound of the candidate's time at ``count`` elements without simulating it:
        :meth:`CompiledSchedule.lower_bound_s` (launch latency plus the congestion bound, the
        bytes every channel/HBM/thread block must carry over its capacity) of the chunks=1
        structure, which carries the same bytes as every pipelined depth. 0 when unknown."""
        if (cand.algorithm, cand.channels, 1) in self.failed:
            return 0.0
        try:
            compiled = self.compiled_for(cand.algorithm, cand.channels, 1)
            scale = count / self.reference_count(cand.channels, 1)
            return float(compiled.lower_bound_s(cand.protocol, dtype=self.dtype, scale=scale))
        except (ScheduleError, SimulationError):
            return 0.0


@functools.lru_cache(maxsize=4096)
def verified(
    collective: str,
    algorithm: str,
    nranks: int,
    channels: int,
    chunks: int,
    redop: str = "sum",
    root: int = 0,
    ranks_per_node: int = 0,
    orders: tuple[tuple[int, ...], ...] | None = None,
) -> bool:
    """Build the schedule at a small count and replay it on numpy once (cached).

    Returns True when verified, False when skipped because it exceeds :data:`VERIFY_MAX_OPS` ops;
    raises the :class:`~scaleup.errors.ScheduleError` of a schedule that is wrong.
    """
    from scaleup.collectives.verify import verify

    count = 2 * nranks * channels * chunks + 1
    spec = CollectiveSpec(collective, nranks, count, root=root, redop=redop)
    params: dict[str, Any] = (
        {"ranks_per_node": ranks_per_node} if algorithm == "hierarchical" else {}
    )
    if orders is not None:
        params["orders"] = [list(o) for o in orders]
    schedule = _library().build_schedule(
        algorithm, spec, channels=channels, chunks=chunks, **params
    )
    if schedule.n_ops > VERIFY_MAX_OPS:
        return False
    verify(schedule, dtype="int32" if redop != "prod" else "float32")
    return True


def _context(
    topology: Topology, collective: str, nranks: int | None, dtype: str, redop: str, root: int
) -> _Context:
    n_all = len(topology.accelerators)
    n = n_all if nranks is None else int(nranks)
    if not 1 <= n <= n_all:
        raise UsageError(f"ranks must be in 1..{n_all} on {topology.name}, got {n}", source="ranks")
    ranks = None if n == n_all else tuple(range(n))
    numpy_dtype(dtype)  # validates the name
    return _cached_context(topology, collective, ranks, n, dtype, redop, root)


@functools.lru_cache(maxsize=8)
def _cached_context(
    topology: Topology,
    collective: str,
    ranks: tuple[int, ...] | None,
    n: int,
    dtype: str,
    redop: str,
    root: int,
) -> _Context:
    CollectiveSpec(collective, n, 0, root=root, redop=redop)  # validates collective, root, redop
    return _Context(topology, collective, ranks, n, dtype, redop, root)


def _choose(
    ctx: _Context,
    cands: list[Candidate],
    nbytes: int,
    bounds: dict[Candidate, float] | None,
    first: Candidate | None,
) -> TunedChoice:
    count = count_for(ctx.collective, nbytes, numpy_dtype(ctx.dtype).itemsize, ctx.nranks)
    order = {c: i for i, c in enumerate(cands)}
    if bounds is not None:  # cheapest bound first, so the best is found early and prunes the rest
        queue = sorted(
            cands, key=lambda c: (max(bounds.get(c, 0.0), ctx.lower_bound_s(c, count)), order[c])
        )
    else:
        queue = list(cands)
    if first is not None and first in order:
        queue.remove(first)
        queue.insert(0, first)
    best: tuple[float, int, Candidate, int, Any] | None = None
    considered = []
    for cand in queue:
        if best is not None and bounds is not None:
            if bounds.get(cand, 0.0) >= best[0]:
                continue  # its time at a smaller size already reaches the best here
            if ctx.lower_bound_s(cand, count) >= best[0]:
                continue  # even its congestion bound cannot beat the best here
        got = ctx.simulate(cand, nbytes, count)
        if got is None:
            continue
        time_s, chunks, result = got
        considered.append((cand, time_s))
        if bounds is not None:
            bounds[cand] = time_s
        key = (time_s, order[cand])
        if best is None or key < (best[0], best[1]):
            best = (time_s, order[cand], cand, chunks, result)
    if best is None:
        reasons = "; ".join(sorted(set(ctx.failed.values()))) or "no candidate"
        raise SimulationError(
            f"no algorithm can run {ctx.collective} on {ctx.nranks} ranks here ({reasons})",
            source=ctx.topology.name,
        )
    time_s, _, cand, chunks, result = best
    return TunedChoice(
        cand.algorithm, cand.protocol, cand.channels, chunks, time_s, result, tuple(considered)
    )


def tune(
    topology: Topology,
    collective: str,
    nbytes: int,
    *,
    dtype: str = "float32",
    nranks: int | None = None,
    algo: str | None = None,
    proto: str | None = None,
    channels: int | None = None,
    redop: str = "sum",
    root: int = 0,
    family: str = "nccl",
) -> TunedChoice:
    """The fastest enabled (algorithm, protocol, channels) for one collective at one size.

    Parameters
    ----------
    topology
        The fabric.
    collective
        One of :data:`scaleup.collectives.spec.COLLECTIVES`.
    nbytes
        The size column of nccl-tests (bytes of the larger buffer).
    dtype, redop, root
        As nccl-tests' ``-d``, ``-o``, ``-r``.
    nranks
        Use the first ``nranks`` accelerators (default: all).
    algo, proto, channels
        Overrides, as ``NCCL_ALGO`` / ``NCCL_PROTO`` / ``NCCL_MAX_NCHANNELS`` pin them.
    family
        ``nccl`` (NCCL's algorithms, the default) or ``all`` (also direct and recursive).

    Returns
    -------
    TunedChoice
        Every enabled candidate is simulated; the least time wins (ties: first in candidate order).
    """
    ctx = _context(topology, collective, nranks, dtype, redop, root)
    cands = candidates(
        topology,
        collective,
        ranks=ctx.ranks,
        algo=algo,
        proto=proto,
        channels=channels,
        family=family,
    )
    return _choose(ctx, cands, int(nbytes), None, None)


def tune_sweep(
    topology: Topology,
    collective: str,
    sizes: Sequence[int],
    *,
    dtype: str = "float32",
    nranks: int | None = None,
    algo: str | None = None,
    proto: str | None = None,
    channels: int | None = None,
    redop: str = "sum",
    root: int = 0,
    family: str = "nccl",
    progress: Callable[[int], None] | None = None,
) -> list[TunedChoice]:
    """:func:`tune` over many sizes, faster: branch and bound over ascending sizes (see module).

    Returns the choices in the order of ``sizes``. ``progress(i)`` is called after each size.
    """
    ctx = _context(topology, collective, nranks, dtype, redop, root)
    cands = candidates(
        topology,
        collective,
        ranks=ctx.ranks,
        algo=algo,
        proto=proto,
        channels=channels,
        family=family,
    )
    order = sorted(range(len(sizes)), key=lambda i: sizes[i])
    bounds: dict[Candidate, float] = {}
    out: list[TunedChoice | None] = [None] * len(sizes)
    first: Candidate | None = None
    for done, i in enumerate(order, start=1):
        choice = _choose(ctx, cands, int(sizes[i]), bounds, first)
        first = Candidate(choice.algorithm, choice.protocol, choice.channels)
        out[i] = choice
        if progress is not None:
            progress(done)
    return [c for c in out if c is not None]
