"""Fast-forward through a run's steady state: when its state recurs, shifted, skip whole periods.

A long collective spends most of its events in a steady state. A ring's chains advance one hop
per step, the same transfers at the same rates, step after step; only the ops differ, by a
fixed offset in the op table. A discrete-event run is a function of its state, so where the
state at ``t3`` is the state at ``t2`` moved by ``P`` ops and ``Δ = t3 - t2`` seconds, and the
ops ahead are the same up to that move, what happened between ``t2`` and ``t3`` happens again
between ``t3`` and ``t3 + Δ``, and so on for as many periods as the ops stay alike.

The state a run's future depends on, at the end of a rate resolve: the transfers in flight
(column class, remaining bytes, predicted end), the starts pending (when, which ops), and the
ops whose dependencies are partly met. Two ops are alike under the move when they have the same
column class (hence the same rates, :mod:`scaleup.sim.run`'s memo key), size, latency, and the
same dependency and successor lists up to the move.

:class:`Recurrence` looks for such moves with a cheap signature of the state, kept per signature
(transfers and pending starts relative to the lowest op in flight, times relative to now,
floats rounded to single precision). A repeat arms it; one period later it confirms the same
move and period again, checks the partly met dependencies and how many periods ``J`` the ops
stay alike, and moves the run ``J`` periods ahead: the starts and ends of the period's ops are
copied ``j`` periods on (``+ jP`` ops, ``+ jΔ`` seconds), its accounting (bytes and busy time
per constraint, events) is added ``J`` times, the successors of the copied ends lose those
dependencies, and the transfers in flight and pending events move by ``JP`` and ``JΔ``. The run
then goes on event by event: the next transient (a ring's turn from reduce-scatter to
all-gather, the last chunk) is simulated as before, and the next steady state skipped again.

Copied times are ``t + jΔ`` rather than a sum of ``j`` periods, so results agree with a run
that steps every event to rounding (~1e-12 relative), not bit for bit. ``scaleup bench
--exact`` never fast-forwards; pipelined runs and runs with stragglers do not either (their
bookkeeping is not part of the state compared here). docs/models.md §6, "Steady states".
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from scaleup.collectives.op_table import csr_rows
from scaleup.sim.engine import START

if TYPE_CHECKING:
    from scaleup.sim.run import Run

__all__ = ["MIN_OPS", "Recurrence"]

#: Runs with fewer ops step every event (nothing to gain; the tests of small runs stay exact)
MIN_OPS = 4096
#: States with more transfers in flight or events queued are not compared: a signature costs
#: their size, in time and in the table (at most _MAX_MISSES signatures of ~24 bytes per
#: transfer: 25 MB at this cap; the 1,024-rank ring has ~35 in flight)
_MAX_ACTIVE = 1024
_MAX_QUEUE = 512
#: Observations without a skip (since the start, or the last skip) after which a run stops
#: looking: one whose state never recurs pays ~15 us for each of that many resolves, no more;
#: a ring of 1,024 ranks on ualink-pod skips after ~600 (a period to repeat, one to confirm)
_MAX_MISSES = 1024
#: Moves armed and not confirmed after which a run stops looking (arming reads every op's
#: dependency count: a run whose repeats never confirm would pay that at every one)
_MAX_FAILED_ARMS = 16
#: Tolerances when two states' floats are compared: rounding of sums in another order only
_RTOL = 1e-9
_ATOL_BYTES = 1e-3
_ATOL_S = 1e-15


@dataclass
class _State:
    """One observation: when, the lowest op in flight, the relative floats, the events so far."""

    now: float
    base: int
    #: remaining bytes of the transfers in flight, their ends and the pending starts' times
    #: relative to now (the transfers in op order, the starts in the order they would run)
    floats: np.ndarray
    n_active: int
    n_events: int


@dataclass
class _Armed:
    """A move seen once (``P`` ops, ``delta`` seconds), waiting for its confirmation one period
    after ``state``: the accounting and partly met dependencies there, to compare and copy."""

    key: tuple[bytes, ...]
    state: _State
    shift: int
    delta: float
    con_bytes: np.ndarray
    con_busy: np.ndarray
    partial: np.ndarray
    partial_left: np.ndarray


class Recurrence:
    """The steady-state detector and fast-forward of one :class:`~scaleup.sim.run.Run`."""

    def __init__(self, run: Run) -> None:
        self.run = run
        self.seen: dict[tuple[bytes, ...], _State] = {}
        self.armed: _Armed | None = None
        self.enabled = True
        self.skipped_periods = 0
        self.jumps = 0
        self.not_before = -np.inf  # no arming before this time (after a failed confirmation)
        self.misses = 0  # observations since the start or the last skip
        self.arms = 0  # moves armed (each confirmed one is a skip)
        self._alike: dict[int, np.ndarray] = {}
        self._fingerprint: tuple[np.ndarray, ...] | None = None

    # ---- observation ---------------------------------------------------------------------
    def observe(self) -> None:
        """Called at the end of every rate resolve: record the state; arm, confirm or skip."""
        if not self.enabled:
            return
        self.misses += 1
        if self.misses > _MAX_MISSES:
            self.enabled = False  # no repeat for this long: this run has no steady state left
            return
        found = self._signature()
        if found is None:
            return
        key, state = found
        armed = self.armed
        if armed is not None:
            expected = armed.state.now + armed.delta
            if (
                key == armed.key
                and state.base == armed.state.base + armed.shift
                and _close_s(state.now, expected, armed.delta)
            ):
                self.armed = None
                if _alike_states(armed.state, state):
                    self._confirm(armed, state)
                return
            if state.now > armed.state.now + 1.5 * armed.delta:
                self.armed = None  # the move did not come back: look again
            else:
                return
        prev = self.seen.get(key)
        self.seen[key] = state
        if (
            prev is not None
            and state.base > prev.base
            and state.now > prev.now
            and state.now >= self.not_before
            and _alike_states(prev, state)
        ):
            if self.arms - self.jumps >= _MAX_FAILED_ARMS:
                self.enabled = False  # each arm reads every op: not without end
                return
            self._arm(key, state, state.base - prev.base, state.now - prev.now)

    def _signature(self) -> tuple[tuple[bytes, ...], _State] | None:
        """The state's signature (hashable, shift-free) and its floats, or None when it is not
        one this module compares (too wide, or an event it does not know)."""
        run = self.run
        a_op = run.a_op
        if not 0 < len(a_op) <= _MAX_ACTIVE or run.env.n_queued > _MAX_QUEUE:
            return None
        now = run.env.now
        completion, on_start = run.completion, run._on_start
        pending = []  # (time, ops) of the live starts, in the order they would run
        for time_s, priority, event in run.env.live():
            if event is completion:
                continue
            if priority != START or event.callbacks != [on_start]:
                return None
            pending.append((time_s, event.value))
        order = np.argsort(a_op, kind="stable")
        ops = a_op[order]
        base = int(ops[0])
        floats = np.concatenate([run.a_rem[order], run.a_fin[order] - now,
                                 [time_s - now for time_s, _ in pending]])  # fmt: skip
        parts = [
            (ops - base).tobytes(),
            run.var_class[run.a_var[order]].tobytes(),
            floats.astype(np.float32).tobytes(),
            *[(ops_ - base).tobytes() for _, ops_ in pending],
        ]
        return tuple(parts), _State(now, base, floats, len(ops), run.n_events)

    # ---- arming and confirming -----------------------------------------------------------
    def _arm(self, key: tuple[bytes, ...], state: _State, shift: int, delta: float) -> None:
        run = self.run
        self.arms += 1
        partial, left = self._partial()
        self.armed = _Armed(key, state, shift, delta, run.con_bytes.copy(), run.con_busy.copy(),
                            partial, left)  # fmt: skip

    def _partial(self) -> tuple[np.ndarray, np.ndarray]:
        """Ops not yet released whose dependencies are partly met, and how many are left."""
        run = self.run
        part = np.flatnonzero(np.isnan(run.start) & (run.deps_left < run.c.n_deps))
        return part, run.deps_left[part]

    def _confirm(self, armed: _Armed, state: _State) -> None:
        """The move came back one period later: check what the signature does not say, find how
        many periods the ops stay alike, and skip them."""
        run = self.run
        p, t2, t3 = armed.shift, armed.state.now, state.now
        self.not_before = t3 + armed.delta  # a failure here is not retried for a period
        partial, left = self._partial()
        if not (
            len(partial) == len(armed.partial)
            and np.array_equal(partial, armed.partial + p)
            and np.array_equal(left, armed.partial_left)
        ):
            return
        start, end = run.start, run.end
        released = np.flatnonzero((start > t2) & (start <= t3))
        ended = np.flatnonzero((end > t2) & (end <= t3))
        pending = [e.value for _, _, e in run.env.live() if e is not run.completion]
        in_state = np.concatenate([run.a_op, *pending]) if pending else run.a_op
        if not (start[in_state] > t2).all():
            return  # something in flight for more than a period: its start is not copied
        touched = np.concatenate([released, ended, partial])
        periods = int(self._runs(p, touched).min()) if len(touched) else 0
        if periods < 1:
            return
        steps = np.arange(1, periods + 1, dtype=np.int64) * p
        new_released = (released[:, None] + steps).ravel()
        new_ended = (ended[:, None] + steps).ravel()
        if not (np.isnan(start[new_released]).all() and np.isnan(end[new_ended]).all()):
            return
        self._skip(armed, state, periods, released, ended, new_released, new_ended)

    def _skip(
        self, armed: _Armed, state: _State, periods: int, released: np.ndarray,
        ended: np.ndarray, new_released: np.ndarray, new_ended: np.ndarray,
    ) -> None:  # fmt: skip
        """Move the run ``periods`` periods ahead (see module docstring)."""
        run = self.run
        p = armed.shift
        delta = state.now - armed.state.now
        lags = np.arange(1, periods + 1) * delta
        run.start[new_released] = (run.start[released][:, None] + lags).ravel()
        run.end[new_ended] = (run.end[ended][:, None] + lags).ravel()
        c = run.c
        np.subtract.at(run.deps_left, c.succ_idx[csr_rows(c.succ_ptr, new_ended)], 1)
        run.con_bytes += periods * (run.con_bytes - armed.con_bytes)
        run.con_busy += periods * (run.con_busy - armed.con_busy)
        run.n_events += periods * (state.n_events - armed.state.n_events)
        moved_ops, moved_s = periods * p, periods * delta
        run.a_op = run.a_op + moved_ops
        run.a_var = c.var_of_op[run.a_op]
        run.a_fin = run.a_fin + moved_s
        env = run.env
        live = env.live()
        for _, _, event in live:
            event.cancel()
        env.jump(state.now + moved_s)
        run.t_last = env.now
        for time_s, priority, event in live:
            if event is run.completion:
                run.completion = run._at(time_s + moved_s, None, run._on_complete, priority)
            else:
                run._at(time_s + moved_s, event.value + moved_ops, run._on_start, priority)
        self.seen.clear()
        self.jumps += 1
        self.skipped_periods += periods
        self.misses = 0

    # ---- which ops are alike under a move ------------------------------------------------
    def _runs(self, shift: int, ops: np.ndarray) -> np.ndarray:
        """For each of ``ops``, how many times in a row the op ``shift`` further on is alike
        (``x ~ x + P``, ``x + P ~ x + 2P``, ...)."""
        n = self.run.c.n_ops
        bad = np.flatnonzero(~self._alike_at(shift))
        bad = np.concatenate([bad, np.arange(max(n - shift, 0), n)])  # no op beyond the table
        keys = np.sort((bad % shift) * (n + shift) + bad)
        query = (ops % shift) * (n + shift) + ops
        nxt = keys[np.searchsorted(keys, query)]  # every residue has a bad op at its end
        return (nxt - query) // shift

    def _alike_at(self, shift: int) -> np.ndarray:
        """``alike[x]``: op ``x + shift`` is op ``x`` moved (for ``x < n - shift``; cached)."""
        if shift not in self._alike:
            self._alike[shift] = self._compute_alike(shift)
        return self._alike[shift]

    def _compute_alike(self, shift: int) -> np.ndarray:
        run, c = self.run, self.run.c
        if self._fingerprint is None:
            self._fingerprint = (
                run.var_class[c.var_of_op], run.nbytes, run.latency, c.n_deps,
                np.diff(c.succ_ptr),
            )  # fmt: skip
        n = c.n_ops
        if shift >= n:
            return np.zeros(0, dtype=bool)
        x = np.arange(n - shift)
        alike = np.ones(n - shift, dtype=bool)
        for values in self._fingerprint:
            alike &= values[:-shift] == values[shift:]
        for ptr, idx in ((c.succ_ptr, c.succ_idx), (c.dep_ptr, c.dep_idx)):
            alike &= _lists_moved(ptr, idx, shift, x, alike)
        return alike


def _lists_moved(
    ptr: np.ndarray, idx: np.ndarray, shift: int, x: np.ndarray, same_length: np.ndarray
) -> np.ndarray:
    """Whether op ``x + shift``'s CSR list is op ``x``'s moved by ``shift`` (for ops whose lists
    have the same length, ``same_length``; others are False already)."""
    ok = same_length.copy()
    cand = x[same_length & (ptr[x + 1] > ptr[x])]
    if not len(cand):
        return ok
    entries = csr_rows(ptr, cand)
    owner = np.repeat(cand, ptr[cand + 1] - ptr[cand])
    partner = entries - ptr[owner] + ptr[owner + shift]
    wrong = idx[partner] - idx[entries] != shift
    ok[owner[wrong]] = False
    return ok


def _close_s(a: float, b: float, scale: float) -> bool:
    return abs(a - b) <= _RTOL * abs(scale) + _ATOL_S


def _alike_states(a: _State, b: _State) -> bool:
    """Whether two observations with one signature hold the same floats (to rounding)."""
    k = a.n_active
    return bool(
        np.allclose(a.floats[:k], b.floats[:k], rtol=_RTOL, atol=_ATOL_BYTES)
        and np.allclose(a.floats[k:], b.floats[k:], rtol=_RTOL, atol=_ATOL_S)
    )
