"""NVLS-Tree simulated from its representative slices, never built in full.

NVLS-Tree across ``m`` servers of ``g`` GPUs (:mod:`scaleup.collectives.algorithms.nvls_tree`)
is ``chunks x channels x heads`` slices, each the same template of ops over one of NCCL's two
trees: ~4 m ops a slice, 16.8 million ops at 16,384 GPUs (16 channels, 8 heads, 16 chunks),
which :class:`~scaleup.sim.table_pattern.TablePattern` must still build and search. Its
automorphisms are known from the construction, as a ring's are from its lanes
(:mod:`scaleup.sim.pattern`):

- the *head rotation*: every server's GPUs rotated by the heads' step ``d`` (heads ``h0, h0 + d,
  ...`` covering one residue class mod ``d``; one head per NIC) takes the slice of head ``l`` to
  the slice of head ``l + d`` of the same lane, its in-switch reductions (whose sources are a
  server's GPUs, a set) onto theirs;
- the *channel copies*: ranks fixed, channel ``c`` to ``c + 2`` (channels of one tree parity run
  the same slices on other data);
- the *mirror*: NCCL's tree 1 is tree 0 mirrored over the servers for an even ``m``
  (``ncclGetDtree``; the builder moves tree 0's slice op for op by that map, ``tree_map``), an
  involution, so server ``N`` to ``m - 1 - N`` with channel ``c`` to ``c ^ 1`` takes each tree
  onto the other (for an odd ``m`` the map is a shift, not an involution: both trees are kept).

So one lane per chunk (channel 0, or channels 0 and 1 without the mirror) with the first head
stands for all: ``chunks x (1 or 2)`` slices are built, with their chunk chains, and the
multiplicity of each is the number of slices its orbit holds. Only the moves the fabric follows
are used: where no head rotation maps it onto itself (a rack of 72 NICs filling leaves of 32
ports down in rank order, so that racks straddle leaves; a degraded NIC link), or where the
heads are no residue class (NCCL's 32 heads of an NVL72 rack's 72 GPUs, ranks 0..31), every
head is a representative (where a rotation by a multiple of the heads' step does, as pods of
24 rails do, one head of each of its orbits), and where the mirror does not, both trees are
built; the channel copies (ranks fixed) always hold. On ``8xgb200-nvl72`` that is 32 heads x 2
trees of 32 x 32 slices, where the table pattern's symmetry search over the whole table took
half a minute. The checks that make the result the exact run's are
:class:`~scaleup.sim.pattern.Pattern`'s: every move maps the fabric onto itself (device types,
capacities, latencies), every representative's route moved by every move is the simulator's
route between the moved ranks (point to point and in-switch), constraint orbits close and
thread blocks of one orbit have one capacity. Anything else (unequal slices, one server,
nothing that moves) returns None and the caller takes the table
pattern or the whole table. A connection's ops are one template op over the chunks of its
lane, so the representatives' own pipelining structure is the quotient's.
``scaleup bench --exact`` never takes this path; tests/sim/test_nvls_tree_pattern.py compares.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from scaleup.collectives.algorithms import build_schedule, prepare_params
from scaleup.collectives.algorithms.tree import dtree_parents, tree_map
from scaleup.collectives.schedule import Schedule
from scaleup.collectives.spec import CollectiveSpec
from scaleup.sim.lane_orbits import fabric_invariant
from scaleup.sim.network import Network
from scaleup.sim.pattern import Move, Pattern, routes_follow
from scaleup.sim.protocols import protocol
from scaleup.sim.simulate import CompiledSchedule
from scaleup.sim.symmetry import device_image, network_image
from scaleup.topology.model import Topology

__all__ = ["NvlsTreePattern"]


class NvlsTreePattern(Pattern):
    """An NVLS-Tree all_reduce as its representative slices, compiled (see module). Build with
    :meth:`of`; :meth:`run` takes ``step_bytes``."""

    pipelined = True

    @classmethod
    def of(
        cls, spec: CollectiveSpec, params: dict[str, Any], topology: Topology,
        network: Network | None = None,
    ) -> NvlsTreePattern | None:  # fmt: skip
        """The pattern of ``build_schedule("nvls_tree", spec, **params)`` on the first
        ``spec.nranks`` accelerators of ``topology``, or None where it does not hold."""
        if spec.collective != "all_reduce" or not 2 <= spec.nranks <= len(topology.accelerators):
            return None
        params = prepare_params("nvls_tree", spec, params)
        n, g, heads = spec.nranks, params["ranks_per_node"], tuple(params["heads"])
        m, k, chunks, h = n // g, params["channels"], params["chunks"], len(heads)
        step = _head_step(heads, g)  # None: no rotation permutes the heads
        lanes = k * chunks
        if m < 2 or spec.count % lanes or (spec.count // lanes) % h:
            return None  # one server, or slices of unequal sizes
        size = spec.count // lanes // h  # every slice's elements
        if size < 1:
            return None
        tree0, tree1 = dtree_parents(m)
        phi = tree_map(tree0, tree1)
        if not (phi is not None and k % 2 == 0 and bool((phi[phi] == np.arange(m)).all())):
            phi = None  # no mirror joins the trees
        net = Network(topology) if network is None else network
        found = _moves(net, topology, g, m, k, step or g, phi)
        if found is None:
            return None
        rotation, mirror, moves = found
        built = 1 if mirror or k == 1 else 2  # channels built: the trees the moves do not join
        # one head of each orbit of the rotation; every head where none permutes them
        kept = sorted(heads)[: rotation // step] if step else sorted(heads)
        reps = build_schedule(
            "nvls_tree", CollectiveSpec("all_reduce", n, chunks * built * size * len(kept)),
            channels=built, chunks=chunks, ranks_per_node=g, heads=tuple(kept),
        )  # fmt: skip
        schedule = Schedule(spec, "nvls_tree", reps.table, reps.scratch_count, params)
        compiled = CompiledSchedule(schedule, topology, None, net)
        if not all(routes_follow(compiled, move) for move in moves):
            return None
        # tag 2c + leg (the builder): the tree each representative rides is c's parity
        parity = reps.table.channel.astype(np.int64) // 2 % 2
        per_tree = np.array([k, 0]) if mirror else np.array([(k + 1) // 2, k // 2])
        multiplicity = (h // len(kept) * per_tree[parity]).astype(np.float64)
        pattern = cls(compiled, multiplicity, moves, int(multiplicity.sum()), 2 * k)
        if pattern.quotient(protocol("simple")) is None:  # orbits do not close: none will
            return None
        return pattern


def _head_step(heads: tuple[int, ...], g: int) -> int | None:
    """The rotation step ``d`` that permutes the heads: they are ``h0, h0 + d, ...`` (one
    residue class mod ``d``, ``d`` dividing ``g``), else None."""
    d = g // len(heads)
    ordered = sorted(heads)
    if g % len(heads) or ordered != list(range(ordered[0], g, d)) or ordered[0] >= d:
        return None
    return d


def _moves(
    net: Network, topology: Topology, g: int, m: int, k: int, step: int, phi: np.ndarray | None
) -> tuple[int, bool, tuple[Move, ...]] | None:
    """The moves the fabric follows, as ``(rotation, mirrored, moves)``:

    - the head rotation by the heads' step ``step``, else by the least multiple of it dividing
      ``g`` that the fabric follows (``rotation``; ``g``: none, every head is a representative).
      Rail-optimised NVL72 racks whose 72 rails form pods of 24 follow a rotation by 24 only;
      racks whose 72 NICs fill leaves of 32 ports down in rank order follow none;
    - the channel copies (``k > 2``; None when the fabric does not follow them);
    - the mirror (``phi``: the servers' mirror), where the fabric follows it (``mirrored``;
      else both trees are built).

    None when nothing moves."""
    rank = np.arange(m * g, dtype=np.int64)
    server, local = rank // g, rank % g
    tags = np.arange(2 * k, dtype=np.int64)  # channel c's tags 2c (in-switch) and 2c + 1 (leg)
    lane, leg = tags // 2, tags % 2
    moves = []
    rotation = g
    for d in range(step, g, step):  # (one head: nothing to rotate)
        if g % d == 0:
            move = _move(net, topology, server * g + (local + d) % g, tags)
            if move is not None:
                rotation = d
                moves.append(move)
                break
    if k > 2:
        copy = np.where(lane + 2 < k, lane + 2, lane % 2)
        move = _move(net, topology, rank, 2 * copy + leg)
        if move is None:  # a cycle of the channels within each tree parity
            return None
        moves.append(move)
    mirrored = False
    if phi is not None:
        move = _move(net, topology, phi[server] * g + local, 2 * (lane ^ 1) + leg)
        if move is not None:
            moves.append(move)
            mirrored = True
    return (rotation, mirrored, tuple(moves)) if moves else None


def _move(net: Network, topology: Topology, sigma: np.ndarray, kappa: np.ndarray) -> Move | None:
    """The move of ranks ``sigma`` and tags ``kappa`` where the fabric follows it, else None."""
    tau = device_image(net, topology, sigma)
    con_image = None if tau is None else network_image(net, tau)
    if con_image is None or not fabric_invariant(net, topology, sigma, con_image):
        return None
    return Move(sigma, con_image, kappa)
