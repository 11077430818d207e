"""One timing run of a compiled schedule: the event handlers over its arrays.

:meth:`scaleup.sim.simulate.CompiledSchedule.run` makes a :class:`Run` per (protocol, size) and
asks for its :meth:`Run.result`. Ops are released when their dependencies are done, pay their
latency (START), move their bytes at max-min fair rates recomputed whenever the set of active
transfers changes (RESOLVE, once per instant), and finish (COMPLETE); see docs/models.md, §6.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
import scipy.sparse as sp

from scaleup.collectives.schedule import _csr_rows
from scaleup.errors import SimulationError
from scaleup.sim.engine import COMPLETE, RESOLVE, START, Environment, Event
from scaleup.sim.fairshare import maxmin, maxmin_entries
from scaleup.sim.protocols import Protocol
from scaleup.sim.timeline import SimResult

if TYPE_CHECKING:
    from scaleup.sim.simulate import CompiledSchedule

__all__ = ["Run"]


class Run:
    """One simulation: the event handlers over the compiled arrays."""

    def __init__(
        self, c: CompiledSchedule, proto: Protocol, bytes_per_count: float, solver: Any
    ) -> None:
        self.c = c
        self.proto = proto
        self.solver = solver
        self.system, self.capacity, self.latency, self.memo = c.system(proto)
        self.merged = c.merged_system(proto)
        self.nbytes = c.count * bytes_per_count
        self.bytes_per_count = bytes_per_count
        n = c.n_ops
        self.start = np.full(n, np.nan)
        self.end = np.full(n, np.nan)
        self.deps_left = c.n_deps.copy()
        self.env = Environment()
        self.a_op = np.zeros(0, dtype=np.int64)
        self.a_var = np.zeros(0, dtype=np.int64)
        self.a_rem = np.zeros(0)
        self.a_rate = np.zeros(0)
        self.a_fin = np.zeros(0)
        self.t_last = 0.0
        self.acc_rows = np.zeros(0, dtype=np.int64)
        self.acc_bytes = np.zeros(0)
        n_groups = len(self.merged[3])  # accounting per merged constraint, expanded at the end
        self.con_bytes = np.zeros(n_groups)
        self.con_busy = np.zeros(n_groups)
        self.completion: Event | None = None
        self.resolve_pending = False
        self.n_events = 0
        self.pos = np.zeros(c.n_vars, dtype=np.int64)

    def result(self) -> SimResult:
        c = self.c
        roots = np.flatnonzero(c.n_deps == 0)
        self._release(roots, c.start_s(self.proto))
        self.env.run()
        if c.n_ops and np.isnan(self.end).any():
            stuck = int(np.flatnonzero(np.isnan(self.end))[0])
            raise SimulationError("op never became ready (dependency cycle?)", op=stuck)
        n_ch = c.net.n_channels
        group, cap = self.merged[5], self.capacity
        pad_b, pad_t = np.r_[self.con_bytes, 0.0], np.r_[self.con_busy, 0.0]  # group -1: nothing
        con_bytes = cap * pad_b[np.where(group >= 0, group, len(self.con_bytes))]
        con_busy = pad_t[np.where(group >= 0, group, len(self.con_busy))]
        self.con_bytes, self.con_busy = con_bytes, con_busy
        names = c.net.constraint_names + tuple(f"r{int(r)}.cta" for r in c.cta_rank)
        t = c.topology
        return SimResult(
            time_s=float(self.end.max()) if c.n_ops else c.start_s(self.proto),
            op_start_s=self.start, op_end_s=self.end,
            op_rank=c.schedule.table.rank, op_channel=c.schedule.table.channel,
            channel_bytes=self.con_bytes[:n_ch], channel_busy_s=self.con_busy[:n_ch],
            constraint_names=names, constraint_bytes=self.con_bytes,
            constraint_busy_s=self.con_busy,
            protocol=self.proto.name, topology=t.name, algorithm=c.schedule.algorithm,
            nbytes=float(c.schedule.spec.count * self.bytes_per_count),
            n_events=self.n_events, channel_names=c.net.constraint_names[:n_ch],
        )  # fmt: skip

    # ---- state changes -------------------------------------------------------------------
    def _advance(self, now: float) -> None:
        dt = now - self.t_last
        if dt > 0.0:
            if len(self.a_rem):
                self.a_rem = np.maximum(self.a_rem - self.a_rate * dt, 0.0)
            if len(self.acc_rows):
                self.con_bytes[self.acc_rows] += self.acc_bytes * dt
                self.con_busy[self.acc_rows] += dt
        self.t_last = now

    def _release(self, ops: np.ndarray, now: float) -> None:
        if not len(ops):
            return
        self.start[ops] = now
        when = now + self.latency[ops]
        first = when[0]
        if len(when) == 1 or (when == first).all():
            self._at(float(first), ops, self._on_start, START)
            return
        times, inv = np.unique(when, return_inverse=True)
        order = np.argsort(inv, kind="stable")
        bounds = np.flatnonzero(np.diff(inv[order])) + 1
        for k, group in enumerate(np.split(ops[order], bounds)):
            self._at(float(times[k]), group, self._on_start, START)

    def _at(self, time_s: float, value: Any, handler: Any, priority: int) -> Event:
        event = Event(handler, value)
        self.env.schedule_at(event, time_s, priority)
        return event

    def _finish(self, ops: np.ndarray, now: float) -> None:
        c = self.c
        self.end[ops] = now
        if len(ops) == 1:
            i = int(ops[0])
            succ = c.succ_idx[c.succ_ptr[i] : c.succ_ptr[i + 1]]
        else:
            succ = c.succ_idx[_csr_rows(c.succ_ptr, ops)]
        if not len(succ):
            return
        np.subtract.at(self.deps_left, succ, 1)
        ready = succ[self.deps_left[succ] == 0]
        if len(ready) > 1:
            ready = np.unique(ready)
        self._release(ready, now)

    def _need_resolve(self) -> None:
        if not self.resolve_pending:
            self.resolve_pending = True
            self._at(self.env.now, None, self._on_resolve, RESOLVE)

    # ---- handlers ------------------------------------------------------------------------
    def _on_start(self, event: Event) -> None:
        self.n_events += 1
        now = self.env.now
        ops = event.value
        self._advance(now)
        size = self.nbytes[ops]
        zero = size <= 0.0
        if zero.any():
            self._finish(ops[zero], now)
            ops, size = ops[~zero], size[~zero]
        if len(ops):
            cat = np.concatenate
            self.a_op = cat((self.a_op, ops))
            self.a_var = cat((self.a_var, self.c.var_of_op[ops]))
            self.a_rem = cat((self.a_rem, size))
            self.a_rate = cat((self.a_rate, np.zeros(len(ops))))
            self.a_fin = cat((self.a_fin, np.full(len(ops), np.inf)))
            self._need_resolve()

    def _on_complete(self, event: Event) -> None:
        self.n_events += 1
        now = self.env.now
        self._advance(now)
        done = self.a_fin <= now
        finished = self.a_op[done]
        keep = ~done
        self.a_op, self.a_var, self.a_rem = self.a_op[keep], self.a_var[keep], self.a_rem[keep]
        self.a_rate, self.a_fin = self.a_rate[keep], self.a_fin[keep]
        self.completion = None
        self._need_resolve()
        self._finish(finished, now)

    def _on_resolve(self, event: Event) -> None:
        self.resolve_pending = False
        now = self.env.now
        self._advance(now)
        if self.completion is not None:
            self.completion.cancel()
            self.completion = None
        if not len(self.a_op):
            self.acc_rows = np.zeros(0, dtype=np.int64)
            self.acc_bytes = np.zeros(0)
            return
        counts = np.bincount(self.a_var, minlength=self.c.n_vars)
        uv = np.flatnonzero(counts)
        cnt = counts[uv]
        key = uv.tobytes() + cnt.tobytes()
        pos = self.pos
        pos[uv] = np.arange(len(uv))
        inv = pos[self.a_var]
        hit = self.memo.get(key)
        if hit is None:
            hit = self._solve(uv, cnt)
            self.memo[key] = hit
        rates, self.acc_rows, self.acc_bytes = hit
        self.a_rate = rates[inv]
        self.a_fin = now + self.a_rem / self.a_rate
        self.completion = self._at(float(self.a_fin.min()), None, self._on_complete, COMPLETE)

    def _solve(self, uv: np.ndarray, cnt: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        m_ptr, m_row, m_use, m_cap, m_car, _group = self.merged
        m_idx = _csr_rows(m_ptr, uv)
        m_col = np.repeat(np.arange(len(uv)), m_ptr[uv + 1] - m_ptr[uv])
        hit = m_row[m_idx]
        if self.solver is maxmin:  # fast path: progressive filling on merged constraints
            rates = maxmin_entries(hit, m_col, m_use[m_idx], m_cap, cnt)
        else:
            col_ptr, row, use, _carried = self.system
            idx = _csr_rows(col_ptr, uv)
            col = np.repeat(np.arange(len(uv)), col_ptr[uv + 1] - col_ptr[uv])
            mark = np.zeros(len(self.capacity), dtype=bool)
            mark[row[idx]] = True
            rows = np.flatnonzero(mark)  # the constraints these variables touch
            where = np.zeros(len(self.capacity), dtype=np.int64)
            where[rows] = np.arange(len(rows))
            usage = sp.csr_matrix((use[idx], (where[row[idx]], col)), shape=(len(rows), len(uv)))
            rates = self.solver(usage, self.capacity[rows], count=cnt)
        if not np.all(np.isfinite(rates)) or np.any(rates <= 0):
            raise SimulationError(
                "a transfer got no bandwidth (a zero-capacity or unbounded route)"
            )
        # payload flow per merged constraint, in units of capacity (x capacity at the end)
        flow = np.bincount(hit, weights=m_car[m_idx] * (rates * cnt)[m_col], minlength=len(m_cap))
        used = np.flatnonzero(flow > 0)
        return rates, used, flow[used]
