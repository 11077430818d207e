"""Each (rank, channel tag)'s ops and their peers: how a rank permutation moves the op DAG.

Split from :mod:`scaleup.sim.symmetry` (the generator search, which documents the method) so that
the op-level bookkeeping -- propagating a rank permutation from one channel's ops, mapping
channel tags, and checking that the DAG is invariant -- stands apart from the device and
constraint maps.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from scaleup.collectives.op_table import csr_rows, csr_sort_order

if TYPE_CHECKING:
    from scaleup.sim.symmetry import Bound

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
        self.tags = [int(x) for x in np.unique(self.chan)]
        self._peer_cache: dict[int, np.ndarray | None] = {}
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
        the ops of tag ``k0`` imply, or None."""
        sigma = np.full(self.n, -1, dtype=np.int64)
        sigma[0] = target
        queue = [0]
        mine, theirs = self._peers(self.k0), self._peers(tag)
        if mine is not None and theirs is not None and mine.shape != theirs.shape:
            return None
        while queue:
            a = queue.pop()
            b = int(sigma[a])
            if mine is not None and theirs is not None:
                x, y = mine[a], theirs[b]
            else:
                ops_a, ops_b = self._ops(a, self.k0), self._ops(b, tag)
                if len(ops_a) != len(ops_b):
                    return None
                x = np.concatenate([self.src[ops_a], self.dst[ops_a]])
                y = np.concatenate([self.src[ops_b], self.dst[ops_b]])
            pairs = np.unique(x * self.n + y)
            x, y = pairs // self.n, pairs % self.n
            if len(np.unique(x)) != len(x):
                return None  # one rank would map to two
            known = sigma[x] >= 0
            if not np.array_equal(sigma[x[known]], y[known]):
                return None
            sigma[x[~known]] = y[~known]
            queue += x[~known].tolist()
        if (sigma < 0).any() or len(np.unique(sigma)) != self.n:
            return None
        return sigma

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
            pairs = np.unique(owner * self.width + dep)
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
