"""A pipelined schedule in steady state: every op of a channel active at once, one solve.

Why. A pipelined tree (NCCL's chain inside each server under a double binary tree over the
servers, :mod:`scaleup.collectives.algorithms.tree`) whose channels no symmetry maps onto one
another drifts apart in the event loop as a ring does (:mod:`scaleup.sim.steady_ring`): on two
NVL72 racks with 18 channels one size takes ~200 s, on 20 racks it cannot finish. Once such a
pipeline is full, every op of a channel moves its bytes over the same span: a tree edge cannot
forward faster than its child delivers, nor the broadcast faster than the root reduces.

What it computes, for a compiled schedule of one chunk (:class:`~scaleup.sim.CompiledSchedule`:
the same routes, usage columns, capacities, thread blocks and step latencies as the event loop):

- **Span.** Each channel tag ``k`` is one variable ``x_k`` = 1 / (its span ``T_k``) whose column
  is the sum over its ops of the op's bytes times the op's usage column (an op that moves ``b``
  bytes over ``T_k`` loads a constraint with ``b / T_k`` times its coefficient). Max-min
  fairness over the ``x_k`` is the fair share of the channels' pipelines: no constraint over its
  capacity, every channel held by a saturated one.
- **Fill.** The longest path of the op DAG, each op weighing its latency plus one pipeline step
  at the rate it has alone (its tightest constraint, thread block included): the first step's
  way from the leaves to the root and back, as the event loop's cut-through charges it
  (:mod:`scaleup.sim.pipeline`), before the later steps load the fabric.
- **Time.** Launch + the largest, over channels, of span + fill.

Labelled an approximation (``SimResult.model`` ``"steady"``): ops that start early or finish
late run faster than the steady rate in the event loop, and the event loop's chunks move whole
(its last chunk drains after the span). docs/models.md ("Rings and trees in steady state")
compares it with the event loop where both run.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from scaleup.collectives.spec import itemsize
from scaleup.errors import SimulationError
from scaleup.sim.fairshare import maxmin
from scaleup.sim.protocols import protocol
from scaleup.sim.simulate import CompiledSchedule
from scaleup.sim.timeline import SimResult

__all__ = ["SteadyPipeline"]


class SteadyPipeline:
    """``compiled`` (one chunk, ops in dependency order) timed in steady state."""

    def __init__(self, compiled: CompiledSchedule) -> None:
        t = compiled.schedule.table
        owner = np.repeat(np.arange(t.n_ops), np.diff(t.dep_ptr))
        if np.any(t.dep_idx >= owner):
            raise SimulationError(
                "the steady-state pipeline needs ops listed after their dependencies",
                source=compiled.schedule.algorithm,
            )
        self.c = compiled
        tags, self.tag_of_op = np.unique(t.channel.astype(np.int64), return_inverse=True)
        self.n_tags = len(tags)
        #: per protocol, what no size changes: (span per count unit, each op's rate alone,
        #: the longest path of step latencies) per tag
        self._per_protocol: dict[str, tuple[np.ndarray, np.ndarray, np.ndarray]] = {}

    def _size_free(self, proto_name: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """:meth:`_span_per_byte`, :meth:`_alone_rate` per op and the latency path, once."""
        hit = self._per_protocol.get(proto_name)
        if hit is None:
            latency = self.c.system(protocol(proto_name))[2]
            alone = self._alone_rate(proto_name)[self.c.var_of_op]
            hit = (self._span_per_byte(proto_name), alone, self._longest(latency))
            self._per_protocol[proto_name] = hit
        return hit

    def _span_per_byte(self, proto_name: str) -> np.ndarray:
        """Per channel tag, its span per byte of op at scale 1 (seconds per count unit)."""
        c = self.c
        (col_ptr, row, use, _carried), capacity, _lat, _memo = c.system(protocol(proto_name))
        # bytes (count units) each variable moves per channel tag
        weight = sp.csr_array(
            (c.count, (c.var_of_op, self.tag_of_op)), shape=(c.n_vars, self.n_tags)
        )
        col_of_entry = np.repeat(np.arange(c.n_vars), np.diff(col_ptr))
        usage = sp.csr_array((use, (row, col_of_entry)), shape=(len(capacity), c.n_vars))
        load = (usage @ weight).tocsr()  # constraint x tag: count units per unit of x
        used = np.flatnonzero(np.diff(load.indptr) > 0)
        x = maxmin(load[used].toarray(), capacity[used])  # 1 / span, per count unit
        return 1.0 / x

    def _longest(self, weight: np.ndarray) -> np.ndarray:
        """Per channel tag, the heaviest path through its ops (each op's ``weight`` added once
        all its dependencies are done)."""
        t = self.c.schedule.table
        done = np.zeros(t.n_ops)
        ptr, idx = t.dep_ptr, t.dep_idx
        for op in range(t.n_ops):  # ops follow their dependencies (checked at construction)
            lo, hi = ptr[op], ptr[op + 1]
            done[op] = (done[idx[lo:hi]].max() if hi > lo else 0.0) + weight[op]
        out = np.zeros(self.n_tags)
        np.maximum.at(out, self.tag_of_op, done)
        return out

    def _alone_rate(self, proto_name: str) -> np.ndarray:
        """Per variable, the rate it would have alone: its tightest constraint's capacity over
        its coefficient there (thread block included)."""
        c = self.c
        (col_ptr, row, use, _carried), capacity, _lat, _memo = c.system(protocol(proto_name))
        ratio = capacity[row] / np.where(use > 0, use, np.nan)
        rate = np.full(c.n_vars, np.inf)
        col_of_entry = np.repeat(np.arange(c.n_vars), np.diff(col_ptr))
        np.fmin.at(rate, col_of_entry, ratio)
        return rate

    def run(self, protocol_name: str, *, dtype: str, scale: float, step_bytes: float) -> SimResult:
        """Time the schedule with every op's count times ``scale``, pipelined in steps of
        ``step_bytes`` (:func:`scaleup.tune.rules.step_bytes_for`)."""
        c = self.c
        t = c.schedule.table
        proto = protocol(protocol_name)
        _system, _capacity, latency, _memo = c.system(proto)
        bytes_per_count = itemsize(dtype) * float(scale)
        span_per_count, alone, waits = self._size_free(proto.name)
        span = span_per_count * bytes_per_count  # per tag, seconds
        op_bytes = c.count * bytes_per_count
        # one step of each op at the rate it has alone (the first steps of a pipeline run
        # before the later ones load the fabric); local ops fold in what arrives, no step
        step = np.minimum(step_bytes, op_bytes) / alone
        fill = self._longest(latency + np.where(c.op_class > 0, step, 0.0))
        start = c.start_s(proto)
        time_s = float(start + np.maximum(span + waits, fill).max()) if t.n_ops else start
        return _result(c, proto.name, time_s, start, bytes_per_count)


def _result(
    c: CompiledSchedule, proto_name: str, time_s: float, start_s: float, bytes_per_count: float
) -> SimResult:
    """A :class:`SimResult` without op times: the bytes each constraint carried, busy from the
    launch to the end."""
    (col_ptr, row, _use, carried), _capacity, _lat, _memo = c.system(protocol(proto_name))
    var_bytes = np.bincount(c.var_of_op, weights=c.count, minlength=c.n_vars) * bytes_per_count
    per_entry = carried * np.repeat(var_bytes, np.diff(col_ptr))
    names = c.net.constraint_names + c.cta_names(protocol(proto_name))
    con_bytes = np.bincount(row, weights=per_entry, minlength=len(names))
    busy = np.where(con_bytes > 0, time_s - start_s, 0.0)
    n_ch = c.net.n_channels
    return SimResult(
        time_s=time_s, op_start_s=np.zeros(0), op_end_s=np.zeros(0),
        op_rank=np.zeros(0, dtype=np.int64), op_channel=np.zeros(0, dtype=np.int64),
        channel_bytes=con_bytes[:n_ch], channel_busy_s=busy[:n_ch], constraint_names=names,
        constraint_bytes=con_bytes, constraint_busy_s=busy, protocol=proto_name,
        topology=c.topology.name, algorithm=c.schedule.algorithm,
        nbytes=float(c.schedule.spec.count * bytes_per_count), n_events=0,
        channel_names=c.net.constraint_names[:n_ch], model="steady",
    )  # fmt: skip
