"""The symmetries of a ring schedule found from its rings and the fabric, before any op exists.

:mod:`scaleup.sim.symmetry` finds a schedule's automorphisms from its op table, which at 1,024
ranks and 8 channels is ~25 million ops that must be built first. A ring schedule is fully
described by its *lanes* (one rank order per channel, direction and chunk,
:class:`~scaleup.collectives.algorithms.ring.Lanes`): a rank permutation ``sigma`` that moves
every lane ``l`` onto a lane ``l'`` rotated by ``s`` positions moves every chain of the ring
onto another chain (row ``(l, p)`` onto ``(l', p + s)``, :func:`~scaleup.collectives.algorithms.
ring.chain_starts`), so its ops onto ops. If ``sigma`` is also an automorphism of the fabric
(devices, channel capacities and latencies, and the routes the simulator takes), the whole
compiled system is invariant under it and the flow-class argument of :mod:`scaleup.sim.symmetry`
applies: one chain per orbit of rows stands for the rest.

Candidates are those :func:`~scaleup.sim.symmetry.find_symmetry` tries (rank 0 to a rank of
the next server(s), to another rank of its own server; on one server to rank 1 or n - 1); each
fixes ``sigma`` through lane 0's order, then every lane is matched (by its order up to rotation)
and the fabric is checked. The routes are checked in :mod:`scaleup.sim.pattern`, which knows
them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy.sparse import coo_matrix
from scipy.sparse.csgraph import connected_components

from scaleup.sim.network import Network
from scaleup.sim.symmetry import device_image, network_image
from scaleup.topology.model import Topology

__all__ = ["LaneGenerator", "Orbits", "fabric_invariant", "lane_generators", "orbits"]

_RTOL = 1e-9


@dataclass(frozen=True)
class LaneGenerator:
    """One automorphism: ranks move by ``sigma``; lane ``l`` goes to lane ``lane_image[l]``
    rotated by ``shift[l]`` positions; network constraint ``c`` to ``con_image[c]`` (-1: the
    device map does not say)."""

    sigma: np.ndarray
    lane_image: np.ndarray
    shift: np.ndarray
    con_image: np.ndarray


@dataclass(frozen=True)
class Orbits:
    """Orbits of a finite set under the group some generators span: ``label[x]`` the orbit of
    ``x``, ``size[o]`` its size, ``first[o]`` its smallest member (orbits numbered by it)."""

    label: np.ndarray
    size: np.ndarray
    first: np.ndarray


def orbits(n: int, images: Sequence[np.ndarray]) -> Orbits:
    """The orbits of ``0..n-1`` under the maps ``images`` (``-1``: no edge), numbered in the
    order of their smallest member."""
    rows = np.concatenate([np.arange(n)] * len(images)) if images else np.zeros(0, np.int64)
    cols = np.concatenate(list(images)) if images else np.zeros(0, np.int64)
    keep = cols >= 0
    graph = coo_matrix(
        (np.ones(int(keep.sum()), dtype=np.int8), (rows[keep], cols[keep])), shape=(n, n)
    )
    count, label = connected_components(graph, directed=True, connection="weak")
    first = np.full(count, n, dtype=np.int64)
    np.minimum.at(first, label, np.arange(n))
    order = np.argsort(first, kind="stable")
    renumber = np.empty(count, dtype=np.int64)
    renumber[order] = np.arange(count)
    label = renumber[label]
    return Orbits(label, np.bincount(label, minlength=count), first[order])


def lane_generators(
    orders: np.ndarray, topology: Topology, net: Network
) -> tuple[LaneGenerator, ...]:
    """Automorphisms of the lanes ``orders`` (R, n) that the fabric follows (see module)."""
    r_count, n = orders.shape
    if n < 2 or n > len(topology.accelerators):
        return ()
    positions = np.argsort(orders, axis=1)
    by_cycle: dict[bytes, list[int]] = {}
    for lane in range(r_count):
        by_cycle.setdefault(_cycle_key(orders[lane], positions[lane]), []).append(lane)
    rpn = topology.ranks_per_node
    families: list[Sequence[int]]
    if len(topology.nodes) > 1 and n == len(topology.accelerators) and n > rpn:
        servers = n // rpn
        shifts = [1 << k for k in range(servers.bit_length()) if (1 << k) < servers]
        families = [range(s * rpn, (s + 1) * rpn) for s in shifts]
        families.append(range(1, rpn))
    else:  # a neighbour on the ring, else a shift by a switch's share of ranks (a Clos leaf)
        families = [sorted({1, n - 1}), [1 << k for k in range(1, n.bit_length()) if 1 << k < n]]
    found: list[LaneGenerator] = list(_same_order_cycles(orders, net))
    base = len(found)
    across = len(families) > 2 or (len(topology.nodes) > 1 and len(families) == 2)
    for i, targets in enumerate(families):
        if i > 0 and len(found) > base and (not across or i < len(families) - 1):
            continue  # one server shift (or one shift on one switch) is enough: the smallest
        for target in targets:
            gen = _generator(orders, positions, by_cycle, int(target), topology, net)
            if gen is not None:
                found.append(gen)
                break
    return tuple(found)


def _same_order_cycles(orders: np.ndarray, net: Network) -> tuple[LaneGenerator, ...]:
    """Lanes with one rank order (channels NCCL laid on the same ring, chunks of one channel)
    differ only in their tag: cycling them, ranks fixed, is an automorphism."""
    r_count, n = orders.shape
    groups: dict[bytes, list[int]] = {}
    for lane in range(r_count):
        groups.setdefault(orders[lane].tobytes(), []).append(lane)
    image = np.arange(r_count)
    for members in groups.values():
        image[members] = np.roll(members, -1)
    if np.array_equal(image, np.arange(r_count)):
        return ()
    identity = np.arange(net.n_constraints)
    return (LaneGenerator(np.arange(n), image, np.zeros(r_count, dtype=np.int64), identity),)


def _cycle_key(order: np.ndarray, position: np.ndarray) -> bytes:
    """A lane's order up to rotation: rotated to start at rank 0."""
    return np.roll(order, -int(position[0])).tobytes()


def _generator(
    orders: np.ndarray,
    positions: np.ndarray,
    by_cycle: dict[bytes, list[int]],
    target: int,
    topology: Topology,
    net: Network,
) -> LaneGenerator | None:
    r_count, n = orders.shape
    p0 = int(positions[0, 0])
    for image_of_0 in range(r_count):  # lane 0 onto lane 0 first, then the others
        q = int(positions[image_of_0, target]) - p0
        sigma = np.empty(n, dtype=np.int64)
        sigma[orders[0]] = orders[image_of_0][(np.arange(n) + q) % n]
        tau = device_image(net, topology, sigma)  # the cheaper check first (same verdict)
        if tau is None:
            continue
        lanes = _lane_map(orders, positions, by_cycle, sigma)
        if lanes is None:
            continue
        con_image = network_image(net, tau)
        if con_image is None or not fabric_invariant(net, topology, sigma, con_image):
            continue
        return LaneGenerator(sigma, lanes[0], lanes[1], con_image)
    return None


def _lane_map(
    orders: np.ndarray, positions: np.ndarray, by_cycle: dict[bytes, list[int]],
    sigma: np.ndarray,
) -> tuple[np.ndarray, np.ndarray] | None:  # fmt: skip
    """Where ``sigma`` sends every lane (a lane with the same order up to rotation, itself when
    it qualifies) and by how many positions, or None."""
    r_count, n = orders.shape
    image = np.full(r_count, -1, dtype=np.int64)
    shift = np.zeros(r_count, dtype=np.int64)
    taken = np.zeros(r_count, dtype=bool)
    moved_all = sigma[orders]
    at_0 = np.argmax(moved_all == 0, axis=1)  # where rank 0 is in every moved lane
    rotated = np.take_along_axis(moved_all, (at_0[:, None] + np.arange(n)) % n, axis=1)
    for lane in range(r_count):
        moved = moved_all[lane]
        free = [x for x in by_cycle.get(rotated[lane].tobytes(), []) if not taken[x]]
        if not free:
            return None
        other = lane if lane in free else free[0]
        image[lane], taken[other] = other, True
        shift[lane] = positions[other, moved[0]]
    return image, shift


def fabric_invariant(
    net: Network, topology: Topology, sigma: np.ndarray, con_image: np.ndarray
) -> bool:
    """Whether the mapped constraints keep their capacities, channels their latencies, and
    accelerators their type."""
    types = np.array([d.type for d in topology.accelerators], dtype=object)
    if not np.array_equal(types[sigma], types[: len(sigma)]):
        return False
    mapped = np.flatnonzero(con_image >= 0)
    if not np.allclose(net.capacity[con_image[mapped]], net.capacity[mapped], rtol=_RTOL, atol=0):
        return False
    ch = mapped[mapped < net.n_channels]
    return bool(
        np.allclose(net.ch_latency[con_image[ch]], net.ch_latency[ch], rtol=_RTOL, atol=0.0)
    )
