"""Watching the ranks of one launch until every one is gone, and naming the rank to blame.

The control block's abort word is the one record of what went wrong first, whoever saw it:

- a rank that raises reports its traceback through its result pipe (``launch``); the launcher
  then stores "rank r raised" unless something came first;
- a waiting rank that times out stores "rank h made no progress", h being the end of the chain of
  "waiting for" words (:meth:`~scaleup.runtime.control.ControlBlock.hung_rank`), not itself;
- a ``pipe`` rank that finds a peer's socket closed stores "rank p died";
- a rank that exits with a non-zero code (or a signal) and no report is blamed by the launcher,
  once it has checked that no rank named a culprit first (a rank that stops *because* of a
  failure always sets the abort word before it exits, so it is never mistaken for the cause);
- SIGINT or SIGTERM to the launcher stores "interrupted", which blames nobody.

Once the abort word is set, ranks spinning on a flag stop within a few hundred polls. Ranks still
alive ``GRACE_S`` later (a rank hung or busy outside any collective) get SIGTERM, and SIGKILL
``GRACE_S`` after that; so every process is gone about ``timeout_s + 2 * GRACE_S`` after a hang
began. Only then, with every exit status in hand, is the error built: the culprit's own report
(its exception and traceback) when it sent one, else how it ended (signal, exit code), else what
its reporter saw. Deaths the launcher inflicted itself are never evidence.
"""

from __future__ import annotations

import signal
import subprocess
import time
import traceback
from multiprocessing.connection import Connection, wait
from typing import Any

from scaleup.errors import (
    ExecutionError,
    Interrupted,
    RankFailed,
    RankTimeout,
    ScaleupError,
)
from scaleup.runtime.control import (
    ABORT_DIED,
    ABORT_INTERRUPTED,
    ABORT_RAISED,
    ABORT_TIMEOUT,
    AbortState,
    ControlBlock,
)
from scaleup.runtime.lifecycle import SignalGuard

__all__ = ["GRACE_S", "Supervisor", "abort_for", "decide", "error_payload"]

#: Seconds ranks get to stop by themselves once the run failed, and again after SIGTERM.
GRACE_S = 1.0
_POLL_S = 0.05


def error_payload(error: BaseException, rank: int) -> dict[str, Any]:
    """What a rank reports about the exception that ended it (picklable)."""
    culprit = error.rank if isinstance(error, ExecutionError) else None
    return {
        "rank": rank,
        "culprit": rank if culprit is None else culprit,
        "timeout": isinstance(error, RankTimeout),
        "type": type(error).__name__,
        "message": str(error),
        "traceback": "".join(traceback.format_exception(error)),
    }


def abort_for(control: ControlBlock, payload: dict[str, Any], reporter: int) -> None:
    """Set the abort word for a rank's :func:`error_payload` (its culprit; a timeout or a raise;
    the first abort wins)."""
    kind = ABORT_TIMEOUT if payload["timeout"] else ABORT_RAISED
    control.set_abort(payload["culprit"], kind, reporter=reporter)


def _how(code: int) -> str:
    if code < 0:
        try:
            return f"died (signal {-code}, {signal.Signals(-code).name})"
        except ValueError:
            return f"died (signal {-code})"
    return f"failed (exit code {code})"


def decide(
    state: AbortState | None,
    reports: dict[int, dict[str, Any]],
    exits: dict[int, int],
    stopped: set[int],
    timeout_s: float,
) -> ScaleupError | None:
    """The error a finished launch raises (None: it succeeded); see the module docstring."""
    if state is None:
        return None
    if state.kind == ABORT_INTERRUPTED:
        name = signal.Signals(state.signum).name if state.signum else "a signal"
        return Interrupted(
            f"interrupted by {name}: every rank was stopped and its segments removed",
            signum=state.signum or int(signal.SIGINT),
        )
    culprit = state.rank if state.rank is not None else 0
    own = reports.get(culprit)
    if state.kind == ABORT_TIMEOUT:
        said = [r["message"] for r in reports.values() if r["timeout"] and r["culprit"] == culprit]
        waiter = "a peer" if state.reporter is None else f"rank {state.reporter}"
        return RankTimeout(
            said[0]
            if said
            else f"rank {culprit} made no progress for {timeout_s:g} s; {waiter} waited for it",
            rank=culprit,
        )
    if own is not None and own["culprit"] == culprit:
        error = RankFailed(f"rank {culprit} raised {own['type']}: {own['message']}", rank=culprit)
        error.remote_traceback = own["traceback"]  # type: ignore[attr-defined]
        return error
    code = exits.get(culprit)
    if code and culprit not in stopped:
        return RankFailed(f"rank {culprit} {_how(code)}", rank=culprit)
    seen = reports.get(state.reporter) if state.reporter is not None else None
    if seen is not None:
        return RankFailed(f"rank {seen['rank']}: {seen['message']}", rank=culprit)
    what = "died" if state.kind == ABORT_DIED else "failed"
    return RankFailed(f"rank {culprit} {what}", rank=culprit)


def _exit_code(proc: Any) -> int | None:
    return proc.poll() if isinstance(proc, subprocess.Popen) else proc.exitcode


class Supervisor:
    """Watches one launch's rank processes (``multiprocessing`` or ``subprocess``) to the end.

    ``readers`` are the result pipes of ``launch`` (rank by connection); ``scaleup run`` has
    none. :meth:`run` returns the per-rank results or raises the error :func:`decide` names.
    """

    def __init__(
        self,
        procs: list[Any],
        control: ControlBlock,
        guard: SignalGuard,
        timeout_s: float,
        readers: dict[Connection, int] | None = None,
    ) -> None:
        self.procs = procs
        self.control = control
        self.guard = guard
        self.timeout_s = timeout_s
        self.readers = dict(readers or {})
        self.results: list[Any] = [None] * len(procs)
        self.reports: dict[int, dict[str, Any]] = {}
        self.exits: dict[int, int] = {}
        self.stopped: set[int] = set()

    def run(self) -> list[Any]:
        running = set(range(len(self.procs)))
        stop_at = float("inf")
        while running:
            sentinels = [
                self.procs[r].sentinel for r in running if hasattr(self.procs[r], "sentinel")
            ]
            if self.readers or sentinels:
                ready = wait([*self.readers, *sentinels], timeout=_POLL_S)
            else:
                time.sleep(_POLL_S)
                ready = []
            if self.guard.signum:  # before any exit: a Ctrl-C also stops the ranks
                self.control.set_abort(None, ABORT_INTERRUPTED, signum=self.guard.consume())
            for conn in ready:
                if conn in self.readers:
                    self._read(conn)  # type: ignore[arg-type]
            exited = [r for r in sorted(running) if _exit_code(self.procs[r]) is not None]
            for rank in exited:
                self._drain(rank)
                running.discard(rank)
                self.exits[rank] = _exit_code(self.procs[rank])  # type: ignore[assignment]
            self._blame(exited)
            now = time.monotonic()
            if stop_at == float("inf") and self.control.abort_state() is not None:
                stop_at = now
            self._stop(running, now - stop_at)
        error = decide(
            self.control.abort_state(), self.reports, self.exits, self.stopped, self.timeout_s
        )
        if error is not None:
            raise error
        return self.results

    def _read(self, conn: Connection) -> None:
        rank = self.readers.pop(conn)
        try:
            status, payload = conn.recv()
        except (EOFError, OSError):
            return
        finally:
            conn.close()
        if status == "ok":
            self.results[rank] = payload
            return
        self.reports[rank] = payload
        abort_for(self.control, payload, rank)

    def _drain(self, rank: int) -> None:
        """Read what an exited rank sent before it went (its sentinel may fire first)."""
        for conn, r in list(self.readers.items()):
            if r == rank:
                if conn.poll():
                    self._read(conn)
                else:
                    self.readers.pop(conn)
                    conn.close()

    def _blame(self, exited: list[int]) -> None:
        """A rank that ended badly with no report and nobody blamed yet is the culprit."""
        bad = [
            r
            for r in exited
            if self.exits[r] != 0 and r not in self.stopped and r not in self.reports
        ]
        if bad and self.control.abort_state() is None:
            rank = min(bad, key=lambda r: (self.exits[r] > 0, r))  # a signal death first
            self.control.set_abort(rank, ABORT_DIED)

    def _stop(self, running: set[int], elapsed_s: float) -> None:
        """SIGTERM after one grace period, SIGKILL after two."""
        if elapsed_s < GRACE_S:
            return
        for rank in running:
            proc = self.procs[rank]
            if rank not in self.stopped:
                self.stopped.add(rank)
                proc.terminate()
            elif elapsed_s >= 2 * GRACE_S:
                proc.kill()
