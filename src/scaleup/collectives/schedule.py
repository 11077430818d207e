"""The Schedule IR: a collective algorithm as data.

A :class:`Schedule` is a DAG of ops on chunks of per-rank buffers. The same Schedule is replayed on
numpy arrays by the verifier, timed on a topology by the simulator and executed across processes
by the runtime.

- Every rank has three buffers, counted in elements of the (late-bound) dtype: ``input`` and
  ``output`` (sized by the :class:`~scaleup.collectives.spec.CollectiveSpec`) and ``scratch``
  (``scratch_count`` elements, for algorithms that stage data).
- A :class:`Chunk` is ``(rank, buffer, offset, count)``.
- An :class:`Op` is one of

  ``copy``           ``dsts[0] = srcs[0]``: a put when the issuing ``rank`` owns the source, a
                     get when it owns the destination, a local copy when both are its own.
  ``reduce``         ``dsts[0] = dsts[0] (redop) srcs[0]``; data moves from the source's rank and
                     the reduction is computed where the destination lives.
  ``switch_reduce``  the switch reads every chunk of ``srcs`` (one per contributing rank), reduces
                     them and multicasts the result into every chunk of ``dsts`` (NVLS).

  Each op lists the ops it depends on (``deps``), and carries a ``channel`` and ``step`` tag for
  pipelined algorithms (timelines, pretty-printing; not semantics). An op reads all its operands
  before it writes, also where a destination aliases a source: :mod:`scaleup.collectives.semantics`
  is the one executable definition.

Storage is columnar (:class:`OpTable`, read-only numpy arrays with CSR lists for sources,
destinations and dependencies) so that a 1024-rank ring of two million ops stays cheap to build,
simulate and serialise; :attr:`Schedule.ops` materialises :class:`Op` objects lazily.

The rows and their columnar table live in :mod:`~scaleup.collectives.op_table` (re-exported
here); this module holds the :class:`Schedule` that validates, measures and serialises them.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from scaleup.arrays import unique
from scaleup.collectives.op_table import Buffer, Chunk, Op, OpKind, OpsView, OpTable, csr_rows
from scaleup.collectives.spec import CollectiveSpec
from scaleup.errors import InputError, ScheduleError

__all__ = ["SCHEDULE_FORMAT", "Buffer", "Chunk", "Op", "OpKind", "OpTable", "Schedule"]

SCHEDULE_FORMAT = "scaleup.schedule/1"


@dataclass(frozen=True, eq=False)
class Schedule:
    """A collective algorithm as data: ops on chunks, with dependencies, claiming ``spec``.

    Construct with :class:`~scaleup.collectives.build.ScheduleBuilder`, an algorithm from
    :mod:`scaleup.collectives.algorithms`, or :meth:`from_json`.
    """

    spec: CollectiveSpec
    algorithm: str
    table: OpTable
    scratch_count: int = 0
    params: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "params", dict(self.params))
        t, n = self.table, self.spec.nranks
        if self.scratch_count < 0:
            raise ScheduleError(f"scratch_count must be >= 0, got {self.scratch_count}")
        checks = (
            (t.rank, "issuing rank"), (t.src_rank, "source rank"), (t.dst_rank, "destination rank"),
        )  # fmt: skip
        for ranks, what in checks:
            bad: Any = np.flatnonzero((ranks < 0) | (ranks >= n)) if len(ranks) else []
            if len(bad):
                op = self._op_of_row(what, int(bad[0]))
                raise ScheduleError(f"{what} {int(ranks[bad[0]])} outside 0..{n - 1}", op=op)
        for name, column in (("kind", t.kind), ("count", t.count)):
            bad = np.flatnonzero(column < 0)
            if len(bad):
                raise ScheduleError(f"negative {name}", op=int(bad[0]))
        bad = np.flatnonzero(t.kind > int(OpKind.SWITCH_REDUCE))
        if len(bad):
            raise ScheduleError(f"unknown op kind code {int(t.kind[bad[0]])}", op=int(bad[0]))
        for buffers in (t.src_buffer, t.dst_buffer):
            bad = np.flatnonzero((buffers < 0) | (buffers > int(Buffer.SCRATCH)))
            if len(bad):
                raise ScheduleError(f"unknown buffer code {int(buffers[bad[0]])}")
        point_to_point = t.kind != int(OpKind.SWITCH_REDUCE)
        bad = np.flatnonzero(point_to_point & ((t.n_srcs != 1) | (t.n_dsts != 1)))
        if len(bad):
            raise ScheduleError(
                "copy and reduce take exactly one source and one destination", op=int(bad[0])
            )
        bad = np.flatnonzero(~point_to_point & ((t.n_srcs < 1) | (t.n_dsts < 1)))
        if len(bad):
            raise ScheduleError(
                "switch_reduce needs at least one source and one destination", op=int(bad[0])
            )
        if len(t.dep_idx):
            bad = np.flatnonzero((t.dep_idx < 0) | (t.dep_idx >= t.n_ops))
            if len(bad):
                op = int(np.searchsorted(t.dep_ptr, bad[0], side="right") - 1)
                raise ScheduleError(
                    f"dependency on op {int(t.dep_idx[bad[0]])}, which does not exist", op=op
                )

    def _op_of_row(self, what: str, row: int) -> int:
        t = self.table
        if what == "issuing rank":
            return row
        ptr = t.src_ptr if what == "source rank" else t.dst_ptr
        return int(np.searchsorted(ptr, row, side="right") - 1)

    # ---- sizes -------------------------------------------------------------------------------
    @property
    def nranks(self) -> int:
        return self.spec.nranks

    def buffer_count(self, buffer: Buffer | int) -> int:
        """Elements per rank of ``buffer``."""
        buffer = Buffer(int(buffer))
        if buffer is Buffer.INPUT:
            return self.spec.input_count
        if buffer is Buffer.OUTPUT:
            return self.spec.output_count
        return self.scratch_count

    @property
    def n_ops(self) -> int:
        return self.table.n_ops

    @property
    def ops(self) -> Sequence[Op]:
        """The ops as :class:`Op` objects, materialised lazily."""
        return OpsView(self.table)

    def op(self, i: int) -> Op:
        return self.table.op(i)

    @property
    def n_steps(self) -> int:
        """Number of distinct step tags (the algorithm's rounds)."""
        return int(len(unique(self.table.step))) if self.n_ops else 0

    @property
    def n_channels(self) -> int:
        """Number of distinct channel tags."""
        return int(len(unique(self.table.channel))) if self.n_ops else 0

    # ---- traffic accounting ------------------------------------------------------------------
    def _fabric_rows(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(sender, receiver, elements) of every point-to-point transfer between two ranks."""
        t = self.table
        p2p = np.flatnonzero(t.kind != int(OpKind.SWITCH_REDUCE))
        src = t.src_rank[t.src_ptr[p2p]]
        dst = t.dst_rank[t.dst_ptr[p2p]]
        remote = src != dst
        return src[remote], dst[remote], t.count[p2p][remote]

    def bytes_sent_per_rank(self, itemsize: int = 1) -> np.ndarray:
        """Bytes each rank sends into the fabric (switch_reduce: each source rank sends once)."""
        t = self.table
        src, _, count = self._fabric_rows()
        sent = np.bincount(src, weights=count, minlength=self.nranks).astype(np.float64)
        switch = np.flatnonzero(t.kind == int(OpKind.SWITCH_REDUCE))
        if len(switch):
            rows = np.repeat(switch, t.n_srcs[switch])
            sent += np.bincount(
                t.src_rank[csr_rows(t.src_ptr, switch)],
                weights=t.count[rows],
                minlength=self.nranks,
            )
        return (sent * itemsize).astype(np.int64)

    def bytes_received_per_rank(self, itemsize: int = 1) -> np.ndarray:
        """Bytes each rank receives from the fabric (switch_reduce: each destination once)."""
        t = self.table
        _, dst, count = self._fabric_rows()
        received = np.bincount(dst, weights=count, minlength=self.nranks).astype(np.float64)
        switch = np.flatnonzero(t.kind == int(OpKind.SWITCH_REDUCE))
        if len(switch):
            rows = np.repeat(switch, t.n_dsts[switch])
            received += np.bincount(
                t.dst_rank[csr_rows(t.dst_ptr, switch)],
                weights=t.count[rows],
                minlength=self.nranks,
            )
        return (received * itemsize).astype(np.int64)

    # ---- mutation helpers (for tests and what-if analysis; return new schedules) -------------
    def without_op(self, op_id: int) -> Schedule:
        """This schedule minus one op; ops that depended on it inherit its dependencies."""
        ops = list(self.ops)
        removed = ops.pop(op_id)
        renumber = {old.id: new for new, old in enumerate(ops)}
        rebuilt = []
        for new_id, op in enumerate(ops):
            deps: list[int] = []
            for d in op.deps:
                deps.extend(removed.deps if d == op_id else [d])
            rebuilt.append(
                Op(new_id, op.kind, op.rank, op.srcs, op.dsts,
                   tuple(dict.fromkeys(renumber[d] for d in deps)), op.channel, op.step)
            )  # fmt: skip
        return self._with_ops(rebuilt)

    def without_dep(self, op_id: int, dep: int) -> Schedule:
        """This schedule with one dependency edge ``dep -> op_id`` removed."""
        ops = list(self.ops)
        op = ops[op_id]
        if dep not in op.deps:
            raise ScheduleError(f"op {op_id} does not depend on op {dep}", op=op_id)
        ops[op_id] = Op(op.id, op.kind, op.rank, op.srcs, op.dsts,
                        tuple(d for d in op.deps if d != dep), op.channel, op.step)  # fmt: skip
        return self._with_ops(ops)

    def _with_ops(self, ops: Sequence[Op]) -> Schedule:
        return Schedule(
            self.spec, self.algorithm, OpTable.from_ops(ops), self.scratch_count, self.params
        )

    # ---- printing and serialisation ----------------------------------------------------------
    def __str__(self) -> str:
        params = ", ".join(f"{k}={v}" for k, v in self.params.items())
        return (
            f"Schedule {self.algorithm}({params}) for {self.spec.name}: {self.n_ops} ops, "
            f"{self.n_steps} steps, {self.n_channels} channels"
        )

    def format_ops(self, limit: int | None = None) -> str:
        """One line per op (the first ``limit`` ops)."""
        n = self.n_ops if limit is None else min(limit, self.n_ops)
        lines = [str(self.table.op(i)) for i in range(n)]
        if n < self.n_ops:
            lines.append(f"... {self.n_ops - n} more ops")
        return "\n".join(lines)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict with a top-level ``ops`` list."""
        t = self.table
        ops = []
        for i in range(t.n_ops):
            ops.append({
                "id": i,
                "kind": OpKind(int(t.kind[i])).label,
                "rank": int(t.rank[i]),
                "count": int(t.count[i]),
                "srcs": [[int(t.src_rank[j]), Buffer(int(t.src_buffer[j])).label,
                          int(t.src_offset[j])] for j in range(t.src_ptr[i], t.src_ptr[i + 1])],
                "dsts": [[int(t.dst_rank[j]), Buffer(int(t.dst_buffer[j])).label,
                          int(t.dst_offset[j])] for j in range(t.dst_ptr[i], t.dst_ptr[i + 1])],
                "deps": [int(d) for d in t.deps_of(i)],
                "channel": int(t.channel[i]),
                "step": int(t.step[i]),
            })  # fmt: skip
        return {
            "format": SCHEDULE_FORMAT,
            "algorithm": self.algorithm,
            "params": {k: _jsonable(v) for k, v in self.params.items()},
            "spec": {
                "collective": self.spec.collective,
                "nranks": self.spec.nranks,
                "count": self.spec.count,
                "root": self.spec.root,
                "redop": self.spec.redop,
            },
            "scratch_count": self.scratch_count,
            "ops": ops,
        }

    def to_json(self, *, indent: int | None = None) -> str:
        return json.dumps(self.to_dict(), indent=indent)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], *, source: str = "schedule") -> Schedule:
        """Load a schedule from :meth:`to_dict`'s form; bad input raises InputError naming it."""
        from scaleup.collectives.schedule_io import schedule_from_dict

        return schedule_from_dict(data, source=source)

    @classmethod
    def from_json(cls, text: str, *, source: str = "schedule") -> Schedule:
        try:
            data = json.loads(text)
        except json.JSONDecodeError as error:
            raise InputError(
                f"not JSON: {error.msg} at line {error.lineno}", source=source
            ) from error
        except RecursionError:
            raise InputError("JSON nested too deeply", source=source) from None
        return cls.from_dict(data, source=source)


def _jsonable(value: Any) -> Any:
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if hasattr(value, "item"):
        return value.item()
    return value
