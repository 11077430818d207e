"""Several schedules on one fabric at once: merged into one op table, timed in one run.

Jobs that share a fabric share its links, NICs, switches and HBMs: their flows are one max-min
fair system, which a separate run per job cannot see. :func:`merge_schedules` turns the jobs'
schedules into one :class:`~scaleup.collectives.schedule.Schedule` over the union of their
accelerators and :func:`run_together` times it once, every flow exactly (no symmetry classes:
jobs break the rank shifts a single collective has), reading each job's time from its own ops.

The merge, per job ``j`` with schedule ``S_j`` on accelerators ``ranks_j``:

- ranks are renumbered onto the union of every job's accelerators (sorted), so two jobs on one
  accelerator issue from the same merged rank (they share its HBM and links);
- op ids and dependencies are shifted by the ops before the job, so no dependency crosses jobs;
- channels are shifted by the channels before the job: each job keeps its own thread blocks
  (channel caps, connections), as two communicators have their own in NCCL;
- counts become bytes (count x the job's element size), so jobs of different dtypes run in one
  run of 1-byte elements.

Each job's roots are released at its own start: its offset plus the launch latency it pays alone
(:meth:`~scaleup.sim.simulate.CompiledSchedule.start_s`), so a job alone in the merge is timed
exactly as :meth:`~scaleup.sim.simulate.CompiledSchedule.run` times it (``exact=True``).

One run has one protocol and one pipelining step (``step_bytes``), so the caller runs the merge
once per distinct (protocol, step) among the jobs and reads each job from its own run; where the
jobs agree (the common case, every bandwidth-bound size) that is exact.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from scaleup.arrays import unique
from scaleup.collectives.op_table import OpTable
from scaleup.collectives.schedule import Schedule
from scaleup.collectives.spec import CollectiveSpec
from scaleup.errors import SimulationError
from scaleup.sim.fairshare import get_solver
from scaleup.sim.network import LINK_CLASSES, Network
from scaleup.sim.protocols import Protocol, protocol
from scaleup.sim.run import Run
from scaleup.sim.simulate import CompiledSchedule
from scaleup.topology.model import Topology

__all__ = ["JobPart", "MergedSchedule", "merge_schedules", "run_together"]


@dataclass(frozen=True)
class JobPart:
    """One job to merge: its schedule, the accelerator of each of its ranks, its element size in
    bytes and when it starts (seconds after the others' time zero)."""

    schedule: Schedule
    ranks: tuple[int, ...]
    itemsize_bytes: int
    offset_s: float = 0.0


@dataclass(frozen=True, eq=False)
class MergedSchedule:
    """The jobs' schedules as one (counts in bytes), the accelerator of each merged rank, and
    the first op of every job (``op_ptr[j]:op_ptr[j + 1]`` are job ``j``'s ops)."""

    schedule: Schedule
    ranks: tuple[int, ...]
    op_ptr: np.ndarray


def merge_schedules(parts: Sequence[JobPart]) -> MergedSchedule:
    """One schedule running every part at once (see the module docstring for the renumbering).

    >>> from scaleup.collectives.build import ScheduleBuilder
    >>> b = ScheduleBuilder(CollectiveSpec("send_recv", nranks=2, count=4), "p2p")
    >>> _ = b.copy(b.input(0, 0, 4), b.output(1, 0, 4))
    >>> s = b.build()
    >>> m = merge_schedules([JobPart(s, (0, 1), 4), JobPart(s, (2, 3), 2)])
    >>> m.ranks, m.schedule.table.count.tolist(), m.op_ptr.tolist()
    ((0, 1, 2, 3), [16, 8], [0, 1, 2])
    """
    union = sorted({int(r) for p in parts for r in p.ranks})
    index = {acc: i for i, acc in enumerate(union)}
    cols: dict[str, list[np.ndarray]] = {}
    ptrs: dict[str, list[np.ndarray]] = {"src_ptr": [], "dst_ptr": [], "dep_ptr": []}
    ends = {"src_ptr": 0, "dst_ptr": 0, "dep_ptr": 0}
    op_base = channel_base = 0
    op_ptr = [0]
    for part in parts:
        t = part.schedule.table
        rmap = np.array([index[int(r)] for r in part.ranks], dtype=np.int64)
        size = int(part.itemsize_bytes)
        shifted = {
            "kind": t.kind, "rank": rmap[t.rank], "count": t.count * size,
            "channel": t.channel + channel_base, "step": t.step,
            "src_rank": rmap[t.src_rank], "src_buffer": t.src_buffer,
            "src_offset": t.src_offset * size, "dst_rank": rmap[t.dst_rank],
            "dst_buffer": t.dst_buffer, "dst_offset": t.dst_offset * size,
            "dep_idx": t.dep_idx + op_base,
        }  # fmt: skip
        for name, column in shifted.items():
            cols.setdefault(name, []).append(np.asarray(column))
        for name in ptrs:
            ptr = getattr(t, name)
            ptrs[name].append(ptr[1:] + ends[name])
            ends[name] += int(ptr[-1])
        op_base += t.n_ops
        channel_base += int(t.channel.max()) + 1 if t.n_ops else 0
        op_ptr.append(op_base)
    table = OpTable(
        **{name: np.concatenate(c) for name, c in cols.items()},
        **{name: np.concatenate([[0], *p]) for name, p in ptrs.items()},
    )
    spec = CollectiveSpec("all_reduce", nranks=max(len(union), 1), count=0)
    merged = Schedule(spec, "jobs", table)
    return MergedSchedule(merged, tuple(union), np.asarray(op_ptr, dtype=np.int64))


class _OffsetRun(Run):
    """A :class:`~scaleup.sim.run.Run` whose roots are released at per-op times (each job's own
    start) instead of all at the schedule's start."""

    def __init__(self, c: CompiledSchedule, proto: Protocol, release_s: np.ndarray,
                 step_bytes: float | None) -> None:  # fmt: skip
        super().__init__(c, proto, 1.0, get_solver("maxmin"), step_bytes)
        self._release_s: np.ndarray | None = release_s

    def _release(self, ops: np.ndarray, now: float) -> None:
        release, self._release_s = self._release_s, None
        if release is None:  # every later release: dependencies met at ``now``
            super()._release(ops, now)
            return
        when = release[ops]
        for time_s in unique(when):
            super()._release(ops[when == time_s], float(time_s))


def run_together(
    topology: Topology,
    parts: Sequence[JobPart],
    *,
    protocol_name: str = "simple",
    step_bytes: float | None = None,
    network: Network | None = None,
) -> list[float]:
    """Every part's time (seconds from its own offset to its last op's end), all run at once.

    Parameters
    ----------
    topology
        The shared fabric.
    parts
        The jobs (:class:`JobPart`).
    protocol_name, step_bytes
        The run's protocol and pipelining step (see
        :meth:`~scaleup.sim.simulate.CompiledSchedule.run`).
    network
        Routes to share with other compilations on ``topology`` (default a new one).

    Examples
    --------
    >>> from scaleup.collectives.build import ScheduleBuilder
    >>> from scaleup.topology import resolve_topology
    >>> b = ScheduleBuilder(CollectiveSpec("send_recv", nranks=2, count=2**20), "p2p")
    >>> _ = b.copy(b.input(0, 0, 2**20), b.output(1, 0, 2**20))
    >>> s, topo = b.build(), resolve_topology("dgx-h100")
    >>> alone = run_together(topo, [JobPart(s, (0, 1), 4)])
    >>> both = run_together(topo, [JobPart(s, (0, 1), 4), JobPart(s, (2, 3), 4)])
    >>> both == alone * 2
    True
    """
    proto = protocol(protocol_name)
    network = Network(topology) if network is None else network
    merged = merge_schedules(parts)
    compiled = CompiledSchedule(merged.schedule, topology, merged.ranks, network)
    if proto.name != "simple" and np.any(compiled.op_class == LINK_CLASSES.index("switch")):
        raise SimulationError(
            "nvls (switch_reduce) runs with the simple protocol only", source=proto.name
        )
    release = np.zeros(compiled.n_ops)
    starts_s = []
    for j, part in enumerate(parts):
        alone = CompiledSchedule(part.schedule, topology, part.ranks, network)
        starts_s.append(alone.start_s(proto))
        release[merged.op_ptr[j] : merged.op_ptr[j + 1]] = part.offset_s + starts_s[-1]
    end_s = _OffsetRun(compiled, proto, release, step_bytes).result().op_end_s
    times = []
    for j, part in enumerate(parts):
        lo, hi = int(merged.op_ptr[j]), int(merged.op_ptr[j + 1])
        times.append(float(end_s[lo:hi].max()) - part.offset_s if hi > lo else starts_s[j])
    return times
