"""Subgroups of ranks (torch's ``new_group(ranks)``): collectives among some ranks of a launch.

A launch's transport, schedules and symmetric heap span all its ranks (a Schedule's control
blocks and barriers count every rank), so a subgroup does not run Schedules. Its collectives
are point-to-point algorithms over a :class:`~scaleup.runtime.p2p.Mailbox` of its own (loads and
stores into peers' slots on the shm transport):

- all_reduce: ring reduce-scatter then ring all-gather (blocks as even as the count allows);
  reduce_scatter and all_gather: the two rings alone; broadcast and reduce: binomial trees
  rooted at the root; all_to_all: pairwise exchange; barrier: a one-element all_reduce.
- Ring steps send and receive at once, one slot-sized piece of each at a time: a piece only
  waits for the previous one to be taken, so a ring of large sends never waits on itself.
- Each subgroup has its own mailbox (slots and counters), so two subgroups used at the same time
  (disjoint or not), world collectives and world ``send``/``recv`` never see each other's
  messages; within a group, collectives run in issue order (:class:`~scaleup.runtime.work.
  InOrder`), so messages between two ranks match in order, as the mailbox requires.
- Making one is collective over the whole world (as in torch, every rank calls ``new_group``
  with the same ranks, in the same order of calls): the mailbox is symmetric memory, and a
  world all_reduce checks that every rank passed the same list. Non-members get a handle whose
  rank is -1 and whose collectives raise :class:`~scaleup.errors.UsageError` (torch warns and
  does nothing, which hides the bug).
- Ranks given to a :class:`SubGroup`'s methods (``broadcast(src=)``, ``reduce(dst=)``) are group
  ranks, as on torch's ProcessGroup objects; the module functions take global ranks, as torch's.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from scaleup.collectives.spec import reduce_ufunc
from scaleup.errors import Unsupported, UsageError
from scaleup.runtime import current
from scaleup.runtime.call_args import (
    ReduceOp,
    average_after,
    check_blocked,
    gathered_list,
    output_of,
    redop_name,
)
from scaleup.runtime.group import ProcessGroup
from scaleup.runtime.p2p import DEFAULT_SLOT_BYTES, Mailbox
from scaleup.runtime.work import InOrder, Work

__all__ = ["SubGroup", "make_subgroup", "resolve", "to_group_rank"]


class SubGroup:
    """Some ranks of a launch (``ranks``, sorted), seen from one rank: ``rank`` is this rank's
    position in ``ranks`` (-1 when it is not a member), ``world_size`` the number of members."""

    def __init__(self, parent: ProcessGroup, ranks: tuple[int, ...], box: Mailbox) -> None:
        self.parent = parent
        self.ranks = ranks
        self.world_size = len(ranks)
        self.is_member = parent.rank in ranks
        self.rank = ranks.index(parent.rank) if self.is_member else -1
        self._box = box
        self._jobs = InOrder(f"scaleup-rank{parent.rank}-group{list(ranks)}")
        self._closed = False

    def __repr__(self) -> str:
        return f"SubGroup(ranks={list(self.ranks)}, rank={self.rank})"

    # ---- collectives -------------------------------------------------------------------------
    def all_reduce(
        self,
        array: np.ndarray,
        op: ReduceOp | str = ReduceOp.SUM,
        *,
        async_op: bool = False,
        algo: str | None = None,
        output: np.ndarray | None = None,
    ) -> Work | None:
        """In place (or into ``output``): the reduction over the group's ranks."""
        self._member("all_reduce")
        out = output_of(array, output, "all_reduce")
        self._check("all_reduce", algo, array, out)
        ufunc, after = reduce_ufunc(redop_name(op)), average_after(op, out, self.world_size)

        def job() -> None:
            work = np.array(array, copy=True).reshape(-1)
            self._ring_all_reduce(work, ufunc)
            _finish(out, work, after)

        return self._submit(job, async_op)

    def reduce_scatter(
        self,
        output: np.ndarray,
        input: np.ndarray,
        op: ReduceOp | str = ReduceOp.SUM,
        *,
        async_op: bool = False,
        algo: str | None = None,
    ) -> Work | None:
        """``output`` (m) = block ``rank`` of the reduction of the members' ``input`` (n*m)."""
        self._check("reduce_scatter", algo, input, output)
        check_blocked(output, input, self.world_size, "reduce_scatter", big="input")
        ufunc, after = reduce_ufunc(redop_name(op)), average_after(op, output, self.world_size)

        def job() -> None:
            work = np.array(input, copy=True).reshape(-1)
            bounds = _bounds(work.size, self.world_size)
            self._ring_reduce_scatter(work, bounds, ufunc)
            mine = work[bounds[self.rank] : bounds[self.rank + 1]]
            _finish(output, mine, after)

        return self._submit(job, async_op)

    def all_gather(
        self,
        output: np.ndarray | list[np.ndarray],
        input: np.ndarray,
        *,
        async_op: bool = False,
        algo: str | None = None,
    ) -> Work | None:
        """``output`` (n*m) = the members' ``input`` (m) in group-rank order, or a list of n
        arrays shaped like ``input`` (torch's list form)."""
        self._member("all_gather")
        after = None
        if isinstance(output, (list, tuple)):
            output, after = gathered_list(output, input, self.world_size)
        self._check("all_gather", algo, input, output)
        check_blocked(input, output, self.world_size, "all_gather", big="output")
        flat_out = output

        def job() -> None:
            work = np.empty(flat_out.size, dtype=flat_out.dtype)
            bounds = _bounds(work.size, self.world_size)
            work[bounds[self.rank] : bounds[self.rank + 1]] = input.reshape(-1)
            self._ring_all_gather(work, bounds)
            _finish(flat_out, work, after)

        return self._submit(job, async_op)

    def all_to_all(
        self,
        output: np.ndarray,
        input: np.ndarray,
        *,
        async_op: bool = False,
        algo: str | None = None,
    ) -> Work | None:
        """Block p of ``input`` goes to group rank p; block p of ``output`` comes from it."""
        self._check("all_to_all", algo, input, output)
        n, i = self.world_size, self.rank
        if output.size != input.size or input.size % n:
            raise UsageError(
                "all_to_all: input and output need the same size, a multiple of the group's size",
                source="all_to_all",
            )

        def job() -> None:
            src = np.array(input, copy=True).reshape(-1)
            work = np.empty_like(src)
            b = _bounds(src.size, n)
            work[b[i] : b[i + 1]] = src[b[i] : b[i + 1]]
            for s in range(1, n):
                to, frm = (i + s) % n, (i - s) % n
                self._exchange(src[b[to] : b[to + 1]], to, work[b[frm] : b[frm + 1]], frm)
            _finish(output, work, None)

        return self._submit(job, async_op)

    def broadcast(
        self,
        array: np.ndarray,
        src: int = 0,
        *,
        async_op: bool = False,
        algo: str | None = None,
        output: np.ndarray | None = None,
    ) -> Work | None:
        """Every member's ``array`` (or ``output``) becomes group rank ``src``'s."""
        self._member("broadcast")
        out = output_of(array, output, "broadcast")
        self._check("broadcast", algo, array, out)
        root = self._root(src, "src")

        def job() -> None:
            work = (
                np.array(array, copy=True).reshape(-1)
                if self.rank == root
                else np.empty(array.size, dtype=array.dtype)
            )
            v, n = (self.rank - root) % self.world_size, self.world_size
            mask = 1
            while mask < n:
                if v & mask:
                    self._recv(work, (v - mask + root) % n)
                    break
                mask <<= 1
            mask >>= 1
            while mask > 0:
                if v + mask < n:
                    self._send(work, (v + mask + root) % n)
                mask >>= 1
            _finish(out, work, None)

        return self._submit(job, async_op)

    def reduce(
        self,
        array: np.ndarray,
        dst: int = 0,
        op: ReduceOp | str = ReduceOp.SUM,
        *,
        async_op: bool = False,
        algo: str | None = None,
        output: np.ndarray | None = None,
    ) -> Work | None:
        """At group rank ``dst``: the reduction in place (or into ``output``); other members'
        arrays are left as they are."""
        self._member("reduce")
        out = output_of(array, output, "reduce")
        self._check("reduce", algo, array, out)
        root = self._root(dst, "dst")
        ufunc = reduce_ufunc(redop_name(op))
        after = average_after(op, out, self.world_size) if self.rank == root else None

        def job() -> None:
            work = np.array(array, copy=True).reshape(-1)
            tmp = np.empty_like(work)
            v, n = (self.rank - root) % self.world_size, self.world_size
            mask = 1
            while mask < n:
                if v & mask:
                    self._send(work, (v - mask + root) % n)
                    break
                if v + mask < n:
                    self._recv(tmp, (v + mask + root) % n)
                    ufunc(work, tmp, out=work)
                mask <<= 1
            if self.rank == root:
                _finish(out, work, after)

        return self._submit(job, async_op)

    def barrier(self) -> None:
        """Every member has arrived (a one-element all_reduce: each rank hears from all)."""
        self.all_reduce(np.zeros(1, dtype=np.int64))

    def close(self) -> None:
        """Finish queued collectives; later ones raise (torch's ``destroy_process_group(g)``).
        The mailbox is released with the world's heap, at shutdown."""
        if not self._closed:
            self._closed = True
            self._jobs.close(self.parent.transport.timeout_s)

    # ---- algorithms --------------------------------------------------------------------------
    def _ring_all_reduce(self, work: np.ndarray, ufunc: np.ufunc) -> None:
        bounds = _bounds(work.size, self.world_size)
        self._ring_reduce_scatter(work, bounds, ufunc)
        self._ring_all_gather(work, bounds)

    def _ring_reduce_scatter(self, work: np.ndarray, bounds: list[int], ufunc: np.ufunc) -> None:
        """Afterwards block ``rank`` of ``work`` holds the reduction over the members."""
        n, i = self.world_size, self.rank
        tmp = np.empty(max(b - a for a, b in zip(bounds, bounds[1:], strict=False)), work.dtype)
        for s in range(n - 1):
            out_b, in_b = (i - s - 1) % n, (i - s - 2) % n
            block = work[bounds[in_b] : bounds[in_b + 1]]
            got = tmp[: block.size]
            self._exchange(work[bounds[out_b] : bounds[out_b + 1]], i + 1, got, i - 1)
            ufunc(block, got, out=block)

    def _ring_all_gather(self, work: np.ndarray, bounds: list[int]) -> None:
        """From block ``rank`` of ``work`` on each member to every block on every member."""
        n, i = self.world_size, self.rank
        for s in range(n - 1):
            out_b, in_b = (i - s) % n, (i - s - 1) % n
            self._exchange(
                work[bounds[out_b] : bounds[out_b + 1]],
                i + 1,
                work[bounds[in_b] : bounds[in_b + 1]],
                i - 1,
            )

    # ---- messages (group ranks, mod the group's size) ----------------------------------------
    def _exchange(self, out: np.ndarray, dst: int, into: np.ndarray, src: int) -> None:
        """Send ``out`` to ``dst`` while receiving ``into`` from ``src``, one slot-sized piece
        of each at a time (each piece its own message), so neither side waits on the other."""
        box, piece = self._box, self._box.payload_bytes
        data, got = _bytes(out), _bytes(into)
        to, frm = self._global(dst), self._global(src)
        sends, recvs = _pieces(data.size, piece), _pieces(got.size, piece)
        for k in range(max(sends, recvs)):
            if k < sends:
                part = data[k * piece : (k + 1) * piece]
                box.send(part, to, box.claim(to, part.size, sending=True))
            if k < recvs:
                part = got[k * piece : (k + 1) * piece]
                box.recv(part, frm, box.claim(frm, part.size, sending=False))

    def _send(self, array: np.ndarray, dst: int) -> None:
        data, to = _bytes(array), self._global(dst)
        self._box.send(data, to, self._box.claim(to, data.size, sending=True))

    def _recv(self, array: np.ndarray, src: int) -> None:
        got, frm = _bytes(array), self._global(src)
        self._box.recv(got, frm, self._box.claim(frm, got.size, sending=False))

    def _global(self, group_rank: int) -> int:
        return self.ranks[group_rank % self.world_size]

    # ---- checks and queueing -----------------------------------------------------------------
    def _member(self, what: str) -> None:
        """Refuse a non-member's call and a destroyed group's."""
        if not self.is_member:
            raise UsageError(
                f"rank {self.parent.rank} is not a member of new_group("
                f"{list(self.ranks)}); only members may call its collectives (torch's "
                "GroupMember.NON_GROUP_MEMBER)",
                source=what,
            )
        if self._closed:
            raise UsageError(f"new_group({list(self.ranks)}) was destroyed", source=what)

    def _check(self, what: str, algo: str | None, inp: Any, out: Any) -> None:
        """Refuse the call before any rank starts it: non-members, a destroyed group, ``algo=``,
        arrays that are not numpy or differ in dtype, a read-only output."""
        self._member(what)
        if algo is not None:
            raise Unsupported(
                f"{what}(algo={algo!r}) on a subgroup: subgroups run fixed point-to-point "
                "algorithms (ring, binomial tree)",
                source="algo",
            )
        if not isinstance(inp, np.ndarray) or not isinstance(out, np.ndarray):
            raise UsageError("collectives take numpy arrays", source=what)
        if inp.dtype != out.dtype:
            raise UsageError(
                f"input dtype {inp.dtype} differs from output dtype {out.dtype}", source=what
            )
        if not out.flags.writeable:
            raise UsageError("it writes into its output; this one is read-only", source=what)

    def _root(self, root: int, name: str) -> int:
        if not 0 <= int(root) < self.world_size:
            raise UsageError(
                f"{name} must be a group rank in 0..{self.world_size - 1}, got {root}", source=name
            )
        return int(root)

    def _submit(self, job: Callable[[], None], async_op: bool) -> Work | None:
        if not async_op:
            self._jobs.drain()
            job()
            return None
        return self._jobs.submit(job)


def _bounds(count: int, n: int) -> list[int]:
    """Block edges of ``count`` elements in ``n`` blocks as even as possible."""
    return [k * count // n for k in range(n + 1)]


def _pieces(nbytes: int, piece: int) -> int:
    return max(1, -(-nbytes // piece))


def _bytes(array: np.ndarray) -> np.ndarray:
    return array.reshape(-1).view(np.uint8)


def _finish(out: np.ndarray, work: np.ndarray, after: Callable[[], None] | None) -> None:
    np.copyto(out, work.reshape(out.shape))
    if after is not None:
        after()


def check_ranks(ranks: Sequence[int], world_size: int) -> tuple[int, ...]:
    """``ranks`` sorted, refusing what is not a list of distinct ranks of the world."""
    rule = f"ranks must be distinct ranks of the world, 0..{world_size - 1}"
    try:
        given = list(ranks)
    except TypeError:
        raise UsageError(f"{rule}; got {ranks!r}", source="new_group") from None
    for r in given:
        if isinstance(r, bool) or not isinstance(r, (int, np.integer)):
            raise UsageError(f"{rule}; got {given} ({r!r} is not an int)", source="new_group")
        if not 0 <= int(r) < world_size:
            raise UsageError(f"{rule}; got {given} ({r} is out of range)", source="new_group")
    out = sorted(int(r) for r in given)
    for a, b in zip(out, out[1:], strict=False):
        if a == b:
            raise UsageError(f"{rule}; got {given} ({a} appears twice)", source="new_group")
    if not out:
        raise UsageError(f"{rule}, at least one; got []", source="new_group")
    return tuple(out)


def make_subgroup(
    parent: ProcessGroup, ranks: tuple[int, ...], slot_bytes: int = DEFAULT_SLOT_BYTES
) -> SubGroup:
    """Collective over the world: check that every rank passed the same ``ranks`` (a world
    all_reduce of a checksum), then make the group's mailbox (symmetric memory)."""
    code = zlib.crc32(np.asarray(ranks, dtype=np.int64).tobytes()) + (len(ranks) << 32)
    seen = np.array([code, -code], dtype=np.int64)
    parent.all_reduce(seen, "max")
    if int(seen[0]) != code or int(seen[1]) != -code:
        raise UsageError(
            f"every rank must call new_group with the same ranks, in "
            f"the same order of calls (this rank passed {list(ranks)}, another a different list)",
            source="new_group",
        )
    group = SubGroup(parent, ranks, Mailbox(parent, slot_bytes))
    parent.subgroups.append(group)
    return group


def resolve(group: Any) -> ProcessGroup | SubGroup:
    """The group a module function acts on: ``None`` is the current (world) group."""
    if group is None:
        return current.group()
    if isinstance(group, (ProcessGroup, SubGroup)):
        return group
    raise UsageError(
        f"group={group!r}: pass None (the world) or what new_group returned", source="group"
    )


def to_group_rank(group: ProcessGroup | SubGroup, global_rank: int, name: str) -> int:
    """``global_rank`` (torch's ``src``/``dst``) as a rank of ``group``."""
    if isinstance(group, ProcessGroup):
        return int(global_rank)
    if int(global_rank) not in group.ranks:
        raise UsageError(
            f"{name}={global_rank} is not a member of new_group({list(group.ranks)}) "
            f"({name} is a global rank, as in torch)",
            source=name,
        )
    return group.ranks.index(int(global_rank))
