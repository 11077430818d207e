"""The result of a channel search: channels, their segments per server, and the plan of them.

A :class:`ChannelPlan` is what :mod:`scaleup.tune.channel_search` returns: ``channels``, each a
:class:`Channel` with one :class:`Segment` per server (the ranks it visits there, in order, and
the NICs it enters and leaves through), all at one per-channel bandwidth. Ranks are
*communicator* ranks (positions in ``plan.ranks``), as the algorithm builders number them. A
ring's order is its segments end to end; a tree channel hangs each server's chain from its head
and the heads under NCCL's double binary tree over the servers (:func:`double_binary_tree`).
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Channel", "ChannelPlan", "Segment", "double_binary_tree"]


@dataclass(frozen=True)
class Segment:
    """A channel's stretch on one server: communicator ranks in visiting order and the NICs it
    enters and leaves through (None on a single server). Servers without a NIC cannot be left
    through the network: then all ranks are searched as one server, ``node`` the first's."""

    node: int
    ranks: tuple[int, ...]
    nic_in: str | None = None
    nic_out: str | None = None


@dataclass(frozen=True)
class Channel:
    """One channel: its segments in ring order (servers ascending) and its bandwidth."""

    index: int
    segments: tuple[Segment, ...]
    bandwidth_bytes_per_s: float

    @property
    def order(self) -> tuple[int, ...]:
        """Every communicator rank in channel order (a ring's order; a tree's chains)."""
        return tuple(r for seg in self.segments for r in seg.ranks)


@dataclass(frozen=True)
class ChannelPlan:
    """The channels of one kind (``ring``, ``tree`` or ``nvls``) on a set of ranks.

    ``bound`` lists the arcs ``(src, dst)`` at capacity on each distinct server shape's first
    server (the links that limit the per-channel bandwidth); ``node_trees`` holds, for trees and
    NVLS, the parent of every server position in NCCL's two binary trees (-1 at the root).
    """

    kind: str
    ranks: tuple[int, ...]
    channels: tuple[Channel, ...]
    bound: tuple[tuple[str, str], ...] = ()
    node_trees: tuple[tuple[int, ...], ...] = ()

    @property
    def n_channels(self) -> int:
        """How many channels."""
        return len(self.channels)

    @property
    def bandwidth_bytes_per_s(self) -> float:
        """Per-channel bandwidth (every channel of a plan runs at one speed)."""
        return min((c.bandwidth_bytes_per_s for c in self.channels), default=0.0)

    @property
    def total_bandwidth_bytes_per_s(self) -> float:
        """Channels x per-channel bandwidth: what one rank sends per second over all channels."""
        return self.n_channels * self.bandwidth_bytes_per_s

    def orders(self) -> list[list[int]]:
        """One rank order per channel, as the ring builder's ``orders=`` parameter takes them."""
        return [list(c.order) for c in self.channels]

    def tree_parents(self, channel: int, tree: int) -> tuple[int, ...]:
        """Parent of every rank in ``tree`` (0 or 1) of ``channel``, -1 at the root: each
        server's chain hangs from its head, the head from the parent server's head."""
        segments = self.channels[channel].segments
        parents = [-1] * len(self.ranks)
        over = self.node_trees[tree] if self.node_trees else (-1,) * len(segments)
        for seg, up in zip(segments, over, strict=True):
            head = seg.ranks[0]
            parents[head] = segments[up].ranks[0] if up >= 0 else -1
            for a, b in zip(seg.ranks, seg.ranks[1:], strict=False):
                parents[b] = a
        return tuple(parents)


def double_binary_tree(m: int) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """Parents of ``m`` positions in NCCL's two complementary binary trees (``ncclGetDtree``):
    tree 0 climbs one set bit at a time towards 0; tree 1 mirrors it (m even) or shifts it by one
    (m odd), so that a position is a leaf in one tree and inner in the other.

    >>> double_binary_tree(4)
    ((-1, 2, 0, 2), (1, 3, 1, -1))
    """

    def up(r: int) -> int:
        if r == 0:
            return -1
        low = r & -r
        higher = (r - low) | (2 * low)
        return higher if higher < m else r - low

    tree0 = tuple(up(r) for r in range(m))
    if m % 2:
        shifted = [tree0[(r - 1) % m] for r in range(m)]
        tree1 = tuple(-1 if p < 0 else (p + 1) % m for p in shifted)
    else:
        tree1 = tuple(-1 if tree0[m - 1 - r] < 0 else m - 1 - tree0[m - 1 - r] for r in range(m))
    return tree0, tree1
