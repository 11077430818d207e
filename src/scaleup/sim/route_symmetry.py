"""Which routes a fabric automorphism carries onto the simulator's own, known without routing.

A pattern stands for a whole schedule only if every representative's route, moved by each of
its moves, is the route the simulator takes between the moved ranks
(:func:`scaleup.sim.pattern.routes_follow`). Routing every moved pair to compare costs a
search per pair: most of the NVLS-Tree pattern's build at 16,384 GPUs. Where the move is an
automorphism of the whole fabric, the answer is known without it. The multipath split of
:class:`~scaleup.sim.paths.FabricPaths` reads the fabric only through hop counts, host and
accelerator kinds, channel capacities, channel and device latencies and channel classes;
a map of devices and channels that keeps all of those carries the shortest paths between two
devices onto those between their images, and the split onto the images' split (the same sums,
added in another order: equal to rounding, which the comparison allows). Three steps of the
routing depend on device or channel ids, not on the fabric alone, so routes through them are
still compared one by one:

- the ECMP cap (:data:`~scaleup.sim.params.MAX_ECMP_FANOUT`), which breaks ties between equally
  wide next hops by channel id (``FabricPaths.capped`` lists the pairs where it bound);
- a torus's dimension-order routes (the order of dimensions is not kept by every automorphism);
- host-staged routes (the nearest host by index).

An in-switch reduction (:meth:`~scaleup.sim.network.Network.switch_route`) reads the issuer's
channels to switches of a type with in-switch reduction, their capacities and latencies, the
switches' latencies, and one channel between each rank and each plane (the last of parallel
ones: an automorphism maps the k-th of parallel channels onto the k-th), so it is carried too;
that is why the automorphism must also keep every device's catalog type.

The same argument lets a pattern route fewer pairs in the first place
(:func:`carry_routes`): of the transfers its representatives make, one per orbit under the
moves that are fabric automorphisms is routed, and the others are its images (a ring's
representative chain crosses every pair of neighbours of its ring: 1,024 splits on a 1,024-XPU
UALink pod, where the moves leave 64 orbits). A pair whose split the ECMP cap pruned is carried
nowhere: its images are routed themselves.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from scaleup.arrays import unique
from scaleup.collectives.op_table import OpKind, OpTable
from scaleup.sim.binding import transfer_codes, transfer_pair
from scaleup.sim.network import Network

__all__ = ["carry_routes", "fabric_automorphism", "routes_carried"]


def fabric_automorphism(net: Network, sigma: np.ndarray, con_image: np.ndarray) -> bool:
    """Whether ``con_image`` maps the fabric onto itself as a whole: every channel onto a
    channel, one to one, by a device permutation that moves accelerator ``r`` to ``sigma[r]``'s
    (and every HBM with it), and keeps device kinds and types, capacities, latencies and channel
    classes, all exactly."""
    n_ch = net.n_channels
    img = con_image[:n_ch]
    if (img < 0).any() or len(unique(img)) != n_ch:
        return False
    dev = np.full(net.n_devices, -1, dtype=np.int64)
    dev[net.ch_src] = net.ch_src[img]
    if not (
        np.array_equal(dev[net.ch_src], net.ch_src[img])
        and np.array_equal(dev[net.ch_dst], net.ch_dst[img])
    ):
        return False  # the channel map is no device map
    on = np.flatnonzero(dev >= 0)
    if len(unique(dev[on])) != len(on):
        return False
    if not (
        np.array_equal(net.ch_capacity[img], net.ch_capacity)
        and np.array_equal(net.ch_latency[img], net.ch_latency)
        and np.array_equal(net.ch_class[img], net.ch_class)
        and np.array_equal(net.dev_latency[dev[on]], net.dev_latency[on])
        and np.array_equal(net.device_type_code[dev[on]], net.device_type_code[on])
    ):
        return False
    acc_dev = dev[net.acc_devices]
    if (acc_dev < 0).any():
        return False
    rank_of = np.full(net.n_devices, -1, dtype=np.int64)
    rank_of[net.acc_devices] = np.arange(len(net.acc_devices))
    acc_img = rank_of[acc_dev]
    return bool(
        (acc_img >= 0).all()
        and np.array_equal(acc_img[: len(sigma)], sigma)
        and np.array_equal(con_image[net.hbm], net.hbm[acc_img])
    )


def routes_carried(
    net: Network, kind: np.ndarray, src: np.ndarray, dst: np.ndarray, automorphism: bool
) -> np.ndarray:
    """For transfers ``kind[i]`` from rank ``src[i]`` to ``dst[i]``: whether an automorphism of
    the fabric (``automorphism``: :func:`fabric_automorphism` holds for the move) carries their
    route onto the simulator's route between the moved ranks (module docstring)."""
    switch = kind == int(OpKind.SWITCH_REDUCE)
    if not automorphism:
        return np.zeros(len(kind), dtype=bool)
    carried = switch.copy()
    fabric = net.fabric
    if not net.topology.peer_access or fabric.dimension_ordered:
        return carried
    capped = fabric.capped
    for i in np.flatnonzero(~switch).tolist():
        s, d = int(src[i]), int(dst[i])
        pair = (int(net.acc_devices[s]), int(net.acc_devices[d]))
        carried[i] = s == d or pair not in capped
    return carried


def carry_routes(
    net: Network, table: OpTable, moves: Sequence[tuple[np.ndarray, np.ndarray]]
) -> int:
    """Add to ``net`` the routes of ``table``'s point-to-point transfers (ranks are accelerator
    indices), routing one per orbit under the ``moves`` ``(sigma, con_image)`` that are
    automorphisms of the fabric (:func:`fabric_automorphism`) and carrying it onto the rest of
    its orbit (module docstring); the number of routes carried rather than routed."""
    fabric = net.fabric
    if not net.topology.peer_access or fabric.dimension_ordered:
        return 0  # host-staged or dimension-ordered routes: none is carried
    autos = [(sigma, image) for sigma, image in moves if fabric_automorphism(net, sigma, image)]
    n = len(net.acc_devices)
    p2p, codes = transfer_codes(table, np.arange(n, dtype=np.int64), n)
    if not autos or not len(p2p):
        return 0
    wanted = set(unique(codes).tolist())
    done: set[int] = set()
    carried = 0
    for code in sorted(wanted):
        if code in done:
            continue
        done.add(code)
        s, d, r = transfer_pair(code, n)
        rid = net.transfer_route(s, d, reduce=r)
        if s == d or (int(net.acc_devices[s]), int(net.acc_devices[d])) in fabric.capped:
            continue
        stack = [(s, d, rid)]
        while stack:  # the orbit of the pair, each image carried from the pair it came from
            s0, d0, rid0 = stack.pop()
            for sigma, image in autos:
                s1, d1 = int(sigma[s0]), int(sigma[d0])
                code1 = (s1 * n + d1) * 2 + int(r)  # transfer_codes' code
                if code1 not in wanted or code1 in done:
                    continue
                rid1 = net.carry_transfer_route(rid0, image, s1, d1, reduce=r)
                if rid1 is not None:
                    done.add(code1)
                    carried += 1
                    stack.append((s1, d1, rid1))
    return carried
