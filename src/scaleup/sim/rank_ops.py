"""Each (rank, channel tag)'s ops and their peers: how a rank permutation moves the op DAG.

Split from :mod:`scaleup.sim.symmetry` (the generator search, which documents the method) so that
the op-level bookkeeping -- propagating a rank permutation from one channel's ops, mapping
channel tags, and checking that the DAG is invariant -- stands apart from the device and
constraint maps.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from scaleup.arrays import unique
from scaleup.collectives.op_table import csr_rows, csr_rows_lengths, csr_sort_order

if TYPE_CHECKING:
    from scaleup.sim.symmetry import Bound, Generator

__all__ = ["RankOps"]


class RankOps:
    """Each (rank, channel tag)'s ops in table order, and their peers, for finding a symmetry."""

    def __init__(self, c: Bound) -> None:
        t = self.table = c.schedule.table
        self.n = c.schedule.nranks
        self.rank = t.rank.astype(np.int64)
        self.chan = t.channel.astype(np.int64)
        self.width = int(self.chan.max(initial=0)) + 1
        n_ops = len(self.rank)
        group = self.rank * self.width + self.chan
        self.counts = np.bincount(group, minlength=self.n * self.width)
        self.order = np.lexsort((np.arange(n_ops), group))
        self.start = np.concatenate([[0], np.cumsum(self.counts)])[:-1]
        self.pos = np.empty(n_ops, dtype=np.int64)
        self.pos[self.order] = np.arange(n_ops) - self.start[group[self.order]]
        self.src = t.src_rank[t.src_ptr[:-1]].astype(np.int64)
        self.dst = t.dst_rank[t.dst_ptr[:-1]].astype(np.int64)
        first = self.order[: max(1, int(self.counts[: self.width].sum()))]
        self.k0 = int(self.chan[first[0]])  # rank 0's first tag
        self.tags = [int(x) for x in unique(self.chan)]
        self._peer_cache: dict[int, np.ndarray | None] = {}
        self._own: _OwnPeers | None = None
        self._shape_cache: dict[int, np.ndarray] = {}
        self._shape_ids: dict[bytes, int] = {}
        #: the symmetry search's verdict on each rank permutation it checked (one search)
        self.verdicts: dict[bytes, Generator | None] = {}
        self._by_key: dict[bytes, list[int]] | None = None
        self._links: set[tuple[int, int]] | None = None

    def _ops(self, rank: int, tag: int) -> np.ndarray:
        g = rank * self.width + tag
        return self.order[self.start[g] : self.start[g] + self.counts[g]]

    def alike(self, a: int, b: int) -> bool:
        """Whether ranks ``a`` and ``b`` issue as many ops on their channel tags, up to a
        permutation of the tags: what any symmetry sending ``a`` to ``b`` needs."""
        rows = self.counts.reshape(self.n, self.width)
        return bool(np.array_equal(np.sort(rows[a]), np.sort(rows[b])))

    def same_position(self, target_rank: np.ndarray, target_tag: np.ndarray) -> np.ndarray:
        """For every op (the p-th of its rank and tag): the p-th op of the targets."""
        return self.order[self.start[target_rank * self.width + target_tag] + self.pos]

    def propagate(self, target: int, tag: int) -> np.ndarray | None:
        """The rank permutation sending rank 0 to ``target`` (and tag ``k0`` to ``tag``) that
        the ops of tag ``k0`` imply, or None: rank ``a``'s peers on ``k0`` go to the peers of
        ``sigma(a)`` on ``tag``, position by position, from rank 0 outwards."""
        mine, theirs = self._peers(self.k0), self._peers(tag)
        if mine is None or theirs is None:
            return self._propagate_ops(target, tag)
        if mine.shape != theirs.shape:
            return None
        own = self._own_peers(mine)
        mine_shape, their_shape = self._shape_of(self.k0, mine), self._shape_of(tag, theirs)
        sigma = np.full(self.n, -1, dtype=np.int64)
        sigma[0] = target
        frontier: np.ndarray | None = np.zeros(1, dtype=np.int64)
        while frontier is not None and len(frontier):  # every rank whose image is new, at once
            image = sigma[frontier]
            # a bijection maps equal peers to equal peers and unequal to unequal: the rows'
            # patterns of repeats must be the same (else two ranks would share an image)
            if (mine_shape[frontier] != their_shape[image]).any():
                return None
            at, row = _csr_entries(own.ptr, frontier)
            frontier = _extend(sigma, own.peer[at], theirs[image[row], own.position[at]])
        return None if frontier is None else _bijection(sigma)

    def _propagate_ops(self, target: int, tag: int) -> np.ndarray | None:
        """:meth:`propagate` where the ranks issue different op counts on a tag: rank by rank
        over their ops."""
        sigma = np.full(self.n, -1, dtype=np.int64)
        sigma[0] = target
        queue = [0]
        while queue:
            a = queue.pop()
            ops_a, ops_b = self._ops(a, self.k0), self._ops(int(sigma[a]), tag)
            if len(ops_a) != len(ops_b):
                return None
            x = np.concatenate([self.src[ops_a], self.dst[ops_a]])
            y = np.concatenate([self.src[ops_b], self.dst[ops_b]])
            new = _extend(sigma, x, y)
            if new is None:
                return None
            queue += new.tolist()
        return _bijection(sigma)

    def _shape_of(self, tag: int, rows: np.ndarray) -> np.ndarray:
        """Each rank's pattern of repeated peers on ``tag`` (``rows``: :meth:`_peers`) as an id,
        the same id for the same pattern on every tag: for each position, the first position
        holding the same peer."""
        found = self._shape_cache.get(tag)
        if found is None:
            own = self._own_peers(rows) if tag == self.k0 else _OwnPeers.of(rows)
            first_of = own.first_of
            ids = self._shape_ids
            found = np.array(
                [ids.setdefault(r.tobytes(), len(ids)) for r in first_of], dtype=np.int64
            )
            self._shape_cache[tag] = found
        return found

    def _own_peers(self, mine: np.ndarray) -> _OwnPeers:
        """Tag ``k0``'s rows of peers (``mine``) condensed once for :meth:`propagate`."""
        if self._own is None:
            self._own = _OwnPeers.of(mine)
        return self._own

    def _peers(self, tag: int) -> np.ndarray | None:
        """(rank, 2 x ops) peers of every rank's ops of ``tag``, or None if their counts differ."""
        if tag not in self._peer_cache:
            self._peer_cache[tag] = self._peers_of(tag)
        return self._peer_cache[tag]

    def _peers_of(self, tag: int) -> np.ndarray | None:
        heads = self.start[np.arange(self.n) * self.width + tag]
        counts = self.counts[np.arange(self.n) * self.width + tag]
        if (counts != counts[0]).any():
            return None
        ops = self.order[heads[:, None] + np.arange(int(counts[0]))[None, :]]
        return np.concatenate([self.src[ops], self.dst[ops]], axis=1)

    def tag_map(self, sigma: np.ndarray) -> dict[int, int] | None:
        """Each channel tag's image: the tag whose ops are its ops with every rank moved by
        ``sigma`` (the same tag when it qualifies: channels alike map to themselves)."""
        by_key = self._tags_by_key()
        candidates = {tag: by_key.get(key, []) for tag, key in self._tag_keys(sigma).items()}
        if not all(candidates.values()):
            return None
        kappa = self._pick_tags(candidates, list(candidates), None)
        if kappa is None or self._keeps_links(kappa):
            return kappa
        # Tags alike on their own but tied to others by dependencies (NVLS-Tree's in-switch tag
        # 2c and tree-leg tag 2c + 1): the tags with fewest candidates first, each choosing a
        # candidate its already-mapped dependency partners allow (the op map needs it anyway).
        order = sorted(candidates, key=lambda tag: (len(candidates[tag]), tag))
        return self._pick_tags(candidates, order, self._tag_links())

    def _pick_tags(
        self, candidates: dict[int, list[int]], order: list[int],
        links: set[tuple[int, int]] | None,
    ) -> dict[int, int] | None:  # fmt: skip
        """One tag image per tag, in ``order``: the tag itself where free and allowed, else the
        first allowed free candidate (``links``: dependency tag pairs that must map to such
        pairs; None: no such check)."""
        kappa: dict[int, int] = {}
        taken: set[int] = set()
        for tag in order:
            free = [x for x in candidates[tag] if x not in taken]
            if links is not None:
                free = [x for x in free if self._allowed(tag, x, kappa, links)] or free
            if not free:
                return None
            kappa[tag] = tag if tag in free else free[0]
            taken.add(kappa[tag])
        return kappa

    @staticmethod
    def _allowed(tag: int, image: int, kappa: dict[int, int], links: set[tuple[int, int]]) -> bool:
        """Whether ``tag -> image`` keeps every dependency pair with an already-mapped tag."""
        forward = all((image, kappa[b]) in links for a, b in links if a == tag and b in kappa)
        backward = all((kappa[a], image) in links for a, b in links if b == tag and a in kappa)
        return forward and backward

    def _keeps_links(self, kappa: dict[int, int]) -> bool:
        """Whether ``kappa`` maps every dependency tag pair onto one."""
        links = self._tag_links()
        return all((kappa.get(a, a), kappa.get(b, b)) in links for a, b in links)

    def _tag_links(self) -> set[tuple[int, int]]:
        """The (tag of an op, tag of an op it depends on) pairs of different tags."""
        if self._links is None:
            t = self.table
            owner = np.repeat(self.chan, np.diff(t.dep_ptr))
            dep = self.chan[np.asarray(t.dep_idx, dtype=np.int64)]
            pairs = unique(owner * self.width + dep)
            a, b = pairs // self.width, pairs % self.width
            self._links = {(int(x), int(y)) for x, y in zip(a, b, strict=True) if x != y}
        return self._links

    def alike_tags(self) -> list[list[int]]:
        """The channel tags in classes of identical ops: every rank's ops of the tag, in order,
        with the same kinds, counts, sources and destinations (classes of one included)."""
        return list(self._tags_by_key().values())

    def _tags_by_key(self) -> dict[bytes, list[int]]:
        if self._by_key is None:
            self._by_key = {}
            for tag, key in self._tag_keys(np.arange(self.n, dtype=np.int64)).items():
                self._by_key.setdefault(key, []).append(tag)
        return self._by_key

    def _tag_keys(self, sigma: np.ndarray) -> dict[int, bytes]:
        """What each tag's ops look like with every rank moved by ``sigma``: for each rank
        ``b``, the ops of rank ``sigma^-1(b)`` in order (kind, count, smallest moved source and
        destination: a set of sources moves as a set)."""
        t = self.table
        src = _smallest(t.src_ptr, sigma[t.src_rank])
        dst = _smallest(t.dst_ptr, sigma[t.dst_rank])
        inverse = np.empty_like(sigma)
        inverse[sigma] = np.arange(len(sigma))
        keys = {}
        for tag in self.tags:
            groups = inverse * self.width + tag
            counts = self.counts[groups]
            offsets = np.concatenate([[0], np.cumsum(counts)])[:-1]
            at = np.repeat(self.start[groups] - offsets, counts) + np.arange(int(counts.sum()))
            ops = self.order[at]
            key = np.concatenate([counts, t.kind[ops], t.count[ops], src[ops], dst[ops]])
            keys[tag] = key.astype(np.int64).tobytes()
        return keys

    def op_image(self, sigma: np.ndarray, kappa: dict[int, int]) -> np.ndarray | None:
        """The op each op maps to, if the op DAG is invariant under (``sigma``, ``kappa``)."""
        t = self.table
        tag_image = np.arange(self.width)
        for a, b in kappa.items():
            tag_image[a] = b
        counts = self.counts.reshape(self.n, self.width)
        if not np.array_equal(counts[sigma][:, tag_image], counts):
            return None
        img = self.same_position(sigma[self.rank], tag_image[self.chan])
        for col in (t.kind, t.count):
            if not np.array_equal(col[img], col):
                return None
        for ptr, vals in ((t.src_ptr, t.src_rank), (t.dst_ptr, t.dst_rank), (t.dep_ptr, t.dep_idx)):
            vals = np.asarray(vals, dtype=np.int64)
            mapped = img[vals] if ptr is t.dep_ptr else sigma[vals]
            if not _rows_match(ptr, mapped, vals, img):
                return None
        return img


def _rows_match(ptr: np.ndarray, mapped: np.ndarray, vals: np.ndarray, img: np.ndarray) -> bool:
    """Whether row ``img[i]`` of the CSR (``ptr``, ``vals``) holds, as a multiset, row ``i`` of
    ``mapped`` for every row ``i``."""
    length = np.diff(ptr)
    if not np.array_equal(length[img], length):
        return False
    if (length == 1).all():  # one entry per row: compare in place
        return bool(np.array_equal(mapped, vals[ptr[:-1][img]]))
    theirs = vals[csr_rows(ptr, img)]
    if np.array_equal(mapped, theirs):  # the image rows list the mapped entries in order
        return True
    # as multisets: both sides sorted within every row
    ours, image = csr_sort_order(length, mapped), csr_sort_order(length, theirs)
    return bool(np.array_equal(mapped[ours], theirs[image]))


def _smallest(ptr: np.ndarray, vals: np.ndarray) -> np.ndarray:
    """The smallest entry of every row of the CSR (``ptr``, ``vals``), rows non-empty."""
    if len(vals) == len(ptr) - 1:
        return vals.astype(np.int64)
    return np.minimum.reduceat(vals, ptr[:-1].astype(np.int64)).astype(np.int64)


def _extend(sigma: np.ndarray, x: np.ndarray, y: np.ndarray) -> np.ndarray | None:
    """Set ``sigma[x] = y`` where unset, in place, and return the ranks newly set; None where the
    pairs contradict one another or what ``sigma`` holds (one rank would map to two)."""
    mapped = _function_of(x, y)
    if mapped is None:
        return None
    x, y = mapped
    known = sigma[x] >= 0
    if not np.array_equal(sigma[x[known]], y[known]):
        return None
    sigma[x[~known]] = y[~known]
    return x[~known]


def _bijection(sigma: np.ndarray) -> np.ndarray | None:
    """``sigma`` if it sends every rank somewhere and no two to the same rank, else None."""
    if (sigma < 0).any() or np.bincount(sigma, minlength=len(sigma)).max() != 1:
        return None
    return sigma


def _function_of(x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
    """The distinct ``x`` (ascending) and the one ``y`` each pairs with, or None when some ``x``
    pairs with two: one stable sort, not the two ``np.unique`` calls it replaces (the symmetry
    search calls this once per rank of every candidate generator)."""
    order = np.argsort(x, kind="stable")
    xs, ys = x[order], y[order]
    same = xs[1:] == xs[:-1]
    if (ys[1:][same] != ys[:-1][same]).any():
        return None
    first = np.ones(len(xs), dtype=bool)
    first[1:] = ~same
    return xs[first], ys[first]


@dataclass(frozen=True)
class _OwnPeers:
    """Each rank's row of peers on tag ``k0`` (ranks x positions), condensed: its distinct peers
    ascending (CSR ``ptr`` / ``peer``) with the ``position`` where each first appears, and for
    every position the first position holding the same peer (``first_of``)."""

    ptr: np.ndarray
    peer: np.ndarray
    position: np.ndarray
    first_of: np.ndarray

    @classmethod
    def of(cls, mine: np.ndarray) -> _OwnPeers:
        n, width = mine.shape
        rows = np.repeat(np.arange(n, dtype=np.int64), width)
        order = np.lexsort((np.tile(np.arange(width), n), mine.ravel(), rows))
        flat = mine.ravel()[order]
        new = np.ones(len(order), dtype=bool)
        new[1:] = (flat[1:] != flat[:-1]) | (rows[order][1:] != rows[order][:-1])
        run = np.cumsum(new) - 1  # the distinct (rank, peer) each sorted entry belongs to
        first_pos = order[new] % max(width, 1)  # stable: the first position of each run
        first_of = np.empty(n * width, dtype=np.int64)
        first_of[order] = first_pos[run]
        counts = np.bincount(rows[order][new], minlength=n)
        ptr = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
        return cls(ptr, flat[new], first_pos, first_of.reshape(n, width))


def _csr_entries(ptr: np.ndarray, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The entries of CSR rows ``rows``, concatenated, and the index into ``rows`` of each."""
    at, lengths = csr_rows_lengths(ptr, rows)
    return at, np.repeat(np.arange(len(rows)), lengths)
