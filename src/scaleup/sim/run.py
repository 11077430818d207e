"""One timing run of a compiled schedule: the event handlers over its arrays.

:meth:`scaleup.sim.simulate.CompiledSchedule.run` makes a :class:`Run` per (protocol, size) and
asks for its :meth:`Run.result`. Ops are released when their dependencies are done, pay their
latency (START), move their bytes at max-min fair rates recomputed whenever the set of active
transfers changes (RESOLVE, once per instant), and finish (COMPLETE); see docs/models.md, §6.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np
import scipy.sparse as sp

from scaleup.collectives.op_table import csr_rows, csr_rows_lengths
from scaleup.errors import SimulationError
from scaleup.sim.engine import COMPLETE, RESOLVE, START, Environment, Event
from scaleup.sim.factored import onto_members
from scaleup.sim.fairshare import maxmin, maxmin_columns, maxmin_entries, sparse_matvec
from scaleup.sim.protocols import Protocol
from scaleup.sim.quotient import Quotient
from scaleup.sim.recurrence import MIN_OPS, Recurrence
from scaleup.sim.timeline import SimResult

if TYPE_CHECKING:
    from scaleup.sim.simulate import CompiledSchedule

__all__ = ["Run", "Slowed"]

#: Entries from which a solve runs on sparse products (:func:`maxmin_columns`) rather than on
#: compacting entry lists (:func:`maxmin_entries`, less overhead per round): both give the same
#: floats, so this only moves time.
_COLUMNS_FROM = 2048

#: Merged constraints from which a solution that uses a quarter of them is kept dense (its
#: accounting two whole-array adds instead of scatters to the used ones; same floats)
_DENSE_FROM = 2048

#: Transfers due within this factor of the present finish at it: completions that differ only
#: by rounding (the same instant reached by sums in another order) are one event, not several
_SNAP = 1.0 + 4 * np.finfo(np.float64).eps


class Slowed(NamedTuple):
    """A protocol's system with stragglers applied (:mod:`scaleup.sim.straggler`): usage
    columns, capacity, per-op latency, rate memo, merged system, and per-op release time (no op
    starts before it)."""

    system: Any
    capacity: np.ndarray
    latency: np.ndarray
    memo: dict[bytes, Any]
    merged: tuple[np.ndarray, ...]
    release_s: np.ndarray


class Run:
    """One simulation: the event handlers over the compiled arrays. ``fast_forward``: skip whole
    periods of a steady state (:mod:`scaleup.sim.recurrence`; never under ``exact``)."""

    def __init__(
        self,
        c: CompiledSchedule | Quotient,
        proto: Protocol,
        bytes_per_count: float,
        solver: Any,
        step_bytes: float | None = None,
        slowed: Slowed | None = None,
        fast_forward: bool = False,
    ) -> None:
        self.c = c
        self.proto = proto
        self.solver = solver
        self.release_s: np.ndarray | None = None
        if slowed is None:
            self.system, self.capacity, self.latency, self.memo = c.system(proto)
            self.merged = c.merged_system(proto)
        else:
            self.system, self.capacity, self.latency, self.memo = slowed[:4]
            self.merged, self.release_s = slowed.merged, slowed.release_s
        #: the rate memo's key: active variables by column class (equal columns, equal rates)
        self.var_class = c.var_classes(proto)
        m_row = self.merged[1]  # 32-bit row indices where they fit: sparse products take them
        self.m_row = m_row.astype(np.int32) if len(m_row) < 2**31 - 1 else m_row
        #: the merged system with group rows (:mod:`scaleup.sim.factored`), where it has them
        self.factored = c.factored_system(proto) if slowed is None else None
        if self.factored is not None:
            f_row = self.factored.row
            self.f_row = f_row.astype(np.int32) if len(f_row) < 2**31 - 1 else f_row
        self.nbytes = c.count * bytes_per_count
        self.bytes_per_count = bytes_per_count
        n = c.n_ops
        self.start = np.full(n, np.nan)
        self.end = np.full(n, np.nan)
        self.deps_left = c.n_deps.copy()
        n_succ = np.diff(c.succ_ptr)
        #: each op's successor where it has exactly one (most chain steps), else -1
        self.one_succ = np.full(n, -1, dtype=np.int64)
        single = np.flatnonzero(n_succ == 1)
        self.one_succ[single] = c.succ_idx[c.succ_ptr[single]]
        self.env = Environment()
        self.a_op = np.zeros(0, dtype=np.int64)
        self.a_var = np.zeros(0, dtype=np.int64)
        self.a_rem = np.zeros(0)
        self.a_rate = np.zeros(0)
        self.a_fin = np.zeros(0)
        self.t_last = 0.0
        self.acc_rows = np.zeros(0, dtype=np.int64)
        self.acc_bytes = np.zeros(0)
        self.acc_dt = 0.0  # time the present solution has held, not yet added to the totals
        n_groups = len(self.merged[3])  # accounting per merged constraint, expanded at the end
        self.con_bytes = np.zeros(n_groups)
        self.con_busy = np.zeros(n_groups)
        self.completion: Event | None = None
        self.resolve_pending = False
        self.n_events = 0
        self.pos = np.zeros(c.n_vars, dtype=np.int64)
        self.iota = np.arange(c.n_vars, dtype=np.int64)
        self.a_thr = np.zeros(0)  # remaining bytes at which an op releases its cut-through succs
        self.a_tt = np.zeros(0)  # when it will (inf: no pending release)
        self.pipe = _Pipelined(self, step_bytes) if step_bytes is not None and n else None
        #: skips whole periods of a steady state (:mod:`scaleup.sim.recurrence`); not for
        #: pipelined runs or stragglers, whose bookkeeping its comparison of states ignores
        self.recurrence = (
            Recurrence(self)
            if fast_forward and self.pipe is None and slowed is None and n >= MIN_OPS
            else None
        )

    def result(self) -> SimResult:
        c = self.c
        roots = np.flatnonzero(self.deps_left == 0)
        self._release(roots, c.start_s(self.proto))
        self.env.run()
        self._account()
        if c.n_ops and np.isnan(self.end).any():
            stuck = int(np.flatnonzero(np.isnan(self.end))[0])
            raise SimulationError("op never became ready (dependency cycle?)", op=stuck)
        n_ch = c.net.n_channels
        group, cap = self.merged[5], self.capacity
        con_bytes = cap * _expand(self.con_bytes, group)
        con_busy = _expand(self.con_busy, group)
        start, end = self.start, self.end
        if isinstance(c, Quotient):  # flow classes stand for the full schedule: expand
            rep = c.sym.rep_of_op
            start, end = start[rep], end[rep]
            con_bytes, con_busy = _expand(con_bytes, c.orbit), _expand(con_busy, c.orbit)
        c = c.full if isinstance(c, Quotient) else c
        self.con_bytes, self.con_busy = con_bytes, con_busy
        names = c.net.constraint_names + c.cta_names(self.proto)
        t = c.topology
        return SimResult(
            time_s=float(end.max()) if c.n_ops else c.start_s(self.proto),
            op_start_s=start, op_end_s=end,
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
            self.acc_dt += dt
        self.t_last = now

    def _account(self) -> None:
        """Add the time the present rate solution held to its constraints' bytes and busy time
        (once per solution, not per event)."""
        rows, dt = self.acc_rows, self.acc_dt
        if dt > 0.0 and len(rows):
            if rows.dtype == bool:  # a dense solution: every constraint, unused ones add 0
                self.con_bytes += self.acc_bytes * dt
                np.add(self.con_busy, dt, out=self.con_busy, where=rows.astype(bool, copy=False))
            else:
                self.con_bytes[rows] += self.acc_bytes * dt
                self.con_busy[rows] += dt
        self.acc_dt = 0.0

    def _release(self, ops: np.ndarray, now: float) -> None:
        if not len(ops):
            return
        if self.release_s is None:
            self.start[ops] = now
            when = now + self.latency[ops]
        else:  # a late rank's ops wait for its arrival
            begin = np.maximum(now, self.release_s[ops])
            self.start[ops] = begin
            when = begin + self.latency[ops]
        first = when[0]
        if len(when) == 1 or (when == first).all():
            self._at(float(first), ops, self._on_start, START)
            return
        order = np.argsort(when, kind="stable")  # by time, ops of one time in their order
        ordered = when[order]
        grouped = ops[order]
        bounds = ((ordered[1:] != ordered[:-1]).nonzero()[0] + 1).tolist()
        begins = [0, *bounds]
        for t, a, b in zip(ordered[begins].tolist(), begins, [*bounds, len(ops)], strict=True):
            self._at(t, grouped[a:b], self._on_start, START)

    def _at(self, time_s: float, value: Any, handler: Any, priority: int) -> Event:
        event = Event(handler, value)
        self.env.schedule_at(event, time_s, priority)
        return event

    def _bytes_done(self, ops: np.ndarray, now: float) -> None:
        if self.pipe is None:
            self._finish(ops, now)
        else:
            self.pipe.bytes_done(ops, now)

    def _finish(self, ops: np.ndarray, now: float) -> None:
        c = self.c
        self.end[ops] = now
        if self.pipe is not None:
            self.pipe.finish(ops, now)
            return
        if len(ops) == 1:
            i = int(ops[0])
            succ = c.succ_idx[c.succ_ptr[i] : c.succ_ptr[i + 1]]
        else:
            succ = self.one_succ[ops]
            if not len(succ) or succ.min() < 0:  # some op has none or several: their lists
                succ = c.succ_idx[csr_rows(c.succ_ptr, ops)]
        self._decrement(succ, now)

    def _decrement(self, succ: np.ndarray, now: float) -> None:
        """Successor entries ``succ`` have one dependency fewer; release those now ready."""
        if len(succ) == 1:  # one successor (most chain steps): no scatter, no unique
            left = self.deps_left[succ] - 1
            self.deps_left[succ] = left
            if left[0] == 0:
                self._release(succ.copy(), now)  # succ may be a view of succ_idx
            return
        if not len(succ):
            return
        np.subtract.at(self.deps_left, succ, 1)
        ready = succ[self.deps_left[succ] == 0]
        if len(ready) > 1:  # sorted, each once (np.unique's answer, without its overhead)
            ready = np.sort(ready)
            first = np.empty(len(ready), dtype=bool)
            first[0] = True
            np.not_equal(ready[1:], ready[:-1], out=first[1:])
            ready = ready[first]
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
        if self.pipe is not None:
            ops = self.pipe.hold_for_connection(ops)
        self._begin(ops, now)

    def _begin(self, ops: np.ndarray, now: float) -> None:
        """Ops whose latency has elapsed start moving their bytes."""
        size = self.nbytes[ops]
        zero = size <= 0.0
        if zero.any():
            self._bytes_done(ops[zero], now)
            ops, size = ops[~zero], size[~zero]
        if len(ops):
            cat = np.concatenate
            self.a_op = cat((self.a_op, ops))
            self.a_var = cat((self.a_var, self.c.var_of_op[ops]))
            self.a_rem = cat((self.a_rem, size))
            self.a_rate = cat((self.a_rate, np.zeros(len(ops))))
            self.a_fin = cat((self.a_fin, np.full(len(ops), np.inf)))
            if self.pipe is not None:  # cut-through state: pipelined runs alone read it
                self.a_thr = cat((self.a_thr, self.pipe.threshold(ops, size)))
                self.a_tt = cat((self.a_tt, np.full(len(ops), np.inf)))
            self._need_resolve()

    def _on_complete(self, event: Event) -> None:
        self.n_events += 1
        now = self.env.now
        self._advance(now)
        if self.pipe is not None:
            fire = self.a_tt <= now * _SNAP
            if fire.any():
                self.a_thr[fire], self.a_tt[fire] = -1.0, np.inf
                self.pipe.release_streams(self.a_op[fire], now)
        done = self.a_fin <= now * _SNAP
        finished = self.a_op[done]
        keep = ~done
        self.a_op, self.a_var, self.a_rem = self.a_op[keep], self.a_var[keep], self.a_rem[keep]
        self.a_rate, self.a_fin = self.a_rate[keep], self.a_fin[keep]
        if self.pipe is not None:
            self.a_thr, self.a_tt = self.a_thr[keep], self.a_tt[keep]
        self.completion = None
        self._need_resolve()
        self._bytes_done(finished, now)

    def _on_resolve(self, event: Event) -> None:
        self.resolve_pending = False
        now = self.env.now
        self._advance(now)
        if self.completion is not None:
            self.completion.cancel()
            self.completion = None
        self._account()
        if not len(self.a_op):
            self.acc_rows = np.zeros(0, dtype=np.int64)
            self.acc_bytes = np.zeros(0)
            return
        counts = np.bincount(self.a_var, minlength=self.c.n_vars)
        uv = counts.nonzero()[0]
        cnt = counts[uv]
        key = self.var_class[uv].tobytes() + cnt.tobytes()
        pos = self.pos
        pos[uv] = self.iota[: len(uv)]
        inv = pos[self.a_var]
        hit = self.memo.get(key)
        if hit is None:
            hit = self._solve(uv, cnt)
            self.memo[key] = hit
        rates, self.acc_rows, self.acc_bytes = hit
        self.a_rate = rates[inv]
        self.a_fin = now + self.a_rem / self.a_rate
        nxt = float(self.a_fin.min())
        if self.pipe is not None:
            pending = self.a_thr >= 0.0
            self.a_tt = np.where(
                pending, now + (self.a_rem - np.where(pending, self.a_thr, 0.0)) / self.a_rate,
                np.inf,
            )  # fmt: skip
            nxt = min(nxt, float(self.a_tt.min()))
        self.completion = self._at(nxt, None, self._on_complete, COMPLETE)
        if self.recurrence is not None:
            self.recurrence.observe()

    def _solve(self, uv: np.ndarray, cnt: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        m_ptr, _m_row, m_use, m_cap, m_car, _group = self.merged
        if self.factored is not None and self.solver is maxmin:
            entries = int((m_ptr[uv + 1] - m_ptr[uv]).sum())
            if entries >= _COLUMNS_FROM:
                return self._solve_factored(uv, cnt)
        m_idx, m_len = csr_rows_lengths(m_ptr, uv)
        columns = len(m_idx) >= _COLUMNS_FROM
        if columns:  # the active variables' columns in CSC form (32-bit indices: scipy's own)
            ptr = np.zeros(len(uv) + 1, dtype=self.m_row.dtype)
            np.cumsum(m_len, out=ptr[1:])
        else:
            m_col = np.repeat(self.iota[: len(uv)], m_len)
        hit = self.m_row[m_idx]
        if self.solver is maxmin and columns:  # progressive filling on merged constraints
            rates = maxmin_columns(ptr, hit, m_use[m_idx], m_cap, cnt)
        elif self.solver is maxmin:  # the same floats; cheaper on a few entries
            rates = maxmin_entries(hit, m_col, m_use[m_idx], m_cap, cnt)
        else:
            col_ptr, row, use, _carried = self.system
            idx = csr_rows(col_ptr, uv)
            col = np.repeat(np.arange(len(uv)), col_ptr[uv + 1] - col_ptr[uv])
            mark = np.zeros(len(self.capacity), dtype=bool)
            mark[row[idx]] = True
            rows = np.flatnonzero(mark)  # the constraints these variables touch
            where = np.zeros(len(self.capacity), dtype=np.int64)
            where[rows] = np.arange(len(rows))
            usage = sp.csr_matrix((use[idx], (where[row[idx]], col)), shape=(len(rows), len(uv)))
            rates = self.solver(usage, self.capacity[rows], count=cnt)
        _check_rates(rates)
        # payload flow per merged constraint, in units of capacity (x capacity at the end);
        # a CSC product adds each constraint's entries in order, as the bincount does
        if columns:
            flow = sparse_matvec("csc", ptr, hit, m_car[m_idx], rates * cnt, len(m_cap))
        else:
            flow = np.bincount(hit, weights=m_car[m_idx] * (rates * cnt)[m_col],
                               minlength=len(m_cap))  # fmt: skip
        return _solution(rates, flow)

    def _solve_factored(
        self, uv: np.ndarray, cnt: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """:meth:`_solve` on the factored system: a rack-wide column is a few entries, not one
        per member constraint (the same rates and flows, to rounding)."""
        f = self.factored
        assert f is not None
        f_idx, f_len = csr_rows_lengths(f.col_ptr, uv)
        ptr = np.zeros(len(uv) + 1, dtype=self.f_row.dtype)
        np.cumsum(f_len, out=ptr[1:])
        hit = self.f_row[f_idx]
        grouped = bool(len(hit)) and int(hit.max()) >= f.n_c
        members = (f.member_ptr, f.member_row, f.member_group) if grouped else None
        rates = maxmin_columns(ptr, hit, f.use[f_idx], self.merged[3], cnt, members)
        _check_rates(rates)
        n_rows = f.n_c + len(f.member_ptr) - 1
        flow = sparse_matvec("csc", ptr, hit, f.carried[f_idx], rates * cnt, n_rows)
        return _solution(rates, onto_members(flow, f) if grouped else flow[: f.n_c])


def _check_rates(rates: np.ndarray) -> None:
    """A SimulationError unless every rate is positive and finite."""
    if not (rates.min() > 0.0 and rates.max() < np.inf):  # NaN fails both: not finite
        raise SimulationError("a transfer got no bandwidth (a zero-capacity or unbounded route)")


def _solution(rates: np.ndarray, flow: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A solve's memo entry: rates, and the used merged constraints with their payload flow
    (all of them, as a mask, where a quarter of many are used: dense adds are cheaper)."""
    used = flow > 0
    if len(used) >= _DENSE_FROM and 4 * np.count_nonzero(used) >= len(used):
        return rates, used, flow  # a quarter of many constraints: dense adds are cheaper
    rows = np.flatnonzero(used)
    return rates, rows, flow[rows]


def _expand(values: np.ndarray, group: np.ndarray) -> np.ndarray:
    """``values`` per group, spread to each member (``group[i]``; -1: no group, 0)."""
    padded = np.r_[values, 0.0]
    return padded[np.where(group >= 0, group, len(values))]


class _Pipelined:
    """The bookkeeping of ``step_bytes`` runs (:mod:`scaleup.sim.pipeline`): cut-through
    releases, connection order, and the rule that an op ends no earlier than what it forwards."""

    def __init__(self, run: Run, step_bytes: float) -> None:
        self.run = run
        self.p = run.c.pipeline()
        self.step_bytes = float(step_bytes)
        n = run.c.n_ops
        self.released = np.zeros(n, dtype=bool)  # cut-through successors already released
        self.moved = np.zeros(n, dtype=bool)  # all bytes moved
        self.wait_conn: dict[int, list[int]] = {}  # op -> ops of its connection waiting for it
        self.wait_tail: dict[int, list[int]] = {}  # op -> ops whose bytes wait for its end
        self.has_conn_waiter = np.zeros(n, dtype=bool)  # keys of wait_conn (to skip the rest)
        self.has_tail_waiter = np.zeros(n, dtype=bool)  # keys of wait_tail
        # a dependency on the op's own connection predecessor orders its bytes (held in
        # hold_for_connection), not its release: it is never counted
        c = run.c
        owner = np.repeat(np.arange(n, dtype=np.int64), np.diff(c.dep_ptr))
        run.deps_left -= np.bincount(owner[self.p.dep_order], minlength=n)

    def threshold(self, ops: np.ndarray, size: np.ndarray) -> np.ndarray:
        """Remaining bytes at which each op releases its cut-through successors (-1: at its end)."""
        early = self.p.streams_out[ops] & (size > self.step_bytes)
        return np.where(early, size - self.step_bytes, -1.0)

    def hold_for_connection(self, ops: np.ndarray) -> np.ndarray:
        """The ops free to move bytes now; the others wait for their connection predecessor."""
        pred = self.p.conn_pred[ops]
        held = (pred >= 0) & ~self.moved[np.maximum(pred, 0)]
        for op, pr in zip(ops[held].tolist(), pred[held].tolist(), strict=True):
            self.wait_conn.setdefault(pr, []).append(op)
        self.has_conn_waiter[pred[held]] = True
        return ops[~held]

    def release_streams(self, ops: np.ndarray, now: float) -> None:
        """``ops`` have moved one step: their cut-through successors lose that dependency."""
        c = self.run.c
        self.released[ops] = True
        idx = csr_rows(c.succ_ptr, ops)
        self.run._decrement(c.succ_idx[idx[self.p.succ_stream[idx]]], now)

    def bytes_done(self, ops: np.ndarray, now: float) -> None:
        """``ops`` moved their bytes: wake their connections; end those not waiting for a
        cut-through predecessor's end."""
        self.moved[ops] = True
        keys = ops[self.has_conn_waiter[ops]]
        if len(keys):
            self.has_conn_waiter[keys] = False
            woken = [w for op in keys.tolist() for w in self.wait_conn.pop(op)]
            if woken:
                self.run._begin(np.asarray(woken, dtype=np.int64), now)
        self.run._finish(self._not_waiting(ops), now)

    def _not_waiting(self, ops: np.ndarray) -> np.ndarray:
        """``ops`` without those whose cut-through predecessor has not ended (each of those is
        parked on its first such predecessor, in ``ops`` order)."""
        t, end = self.run.c, self.run.end
        idx = csr_rows(t.dep_ptr, ops)
        owner = np.repeat(np.arange(len(ops)), t.dep_ptr[ops + 1] - t.dep_ptr[ops])
        deps = t.dep_idx[idx]
        open_ = self.p.dep_stream[idx] & np.isnan(end[deps])
        if not open_.any():
            return ops
        waiting, first = np.unique(owner[open_], return_index=True)  # owner is ascending
        for op, dep in zip(ops[waiting].tolist(), deps[open_][first].tolist(), strict=True):
            self.wait_tail.setdefault(dep, []).append(op)
            self.has_tail_waiter[dep] = True
        free = np.ones(len(ops), dtype=bool)
        free[waiting] = False
        return ops[free]

    def finish(self, ops: np.ndarray, now: float) -> None:
        """``ops`` ended: successors not yet released lose the dependency; waiters re-check."""
        c = self.run.c
        if self.run.one_succ[ops].min(initial=0) >= 0:  # one successor each: no CSR walk
            idx = c.succ_ptr[ops]
            skip = self.p.succ_stream[idx] & self.released[ops]
        else:
            idx = csr_rows(c.succ_ptr, ops)
            skip = self.p.succ_stream[idx] & np.repeat(
                self.released[ops], c.succ_ptr[ops + 1] - c.succ_ptr[ops]
            )
        skip |= self.p.succ_order[idx]
        self.released[ops] = True
        self.run._decrement(c.succ_idx[idx[~skip]], now)
        keys = ops[self.has_tail_waiter[ops]]
        if len(keys):
            self.has_tail_waiter[keys] = False
            woken = [w for op in keys.tolist() for w in self.wait_tail.pop(op)]
            self.run._finish(self._not_waiting(np.asarray(woken, dtype=np.int64)), now)
