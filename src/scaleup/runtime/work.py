"""The handle of an asynchronous collective (``async_op=True``) or point-to-point message, and
the in-order queue that runs a group's asynchronous collectives."""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable

from scaleup.errors import ScaleupError

__all__ = ["InOrder", "Work"]


class Work:
    """Handle of an asynchronous collective: :meth:`wait` blocks and re-raises its error."""

    def __init__(self) -> None:
        self._done = threading.Event()
        self._error: BaseException | None = None

    def _finish(self, error: BaseException | None) -> None:
        self._error = error
        self._done.set()

    def _complete(self, body: Callable[[], None]) -> None:
        """Run ``body``; finish with its error (handed to :meth:`wait`) or None."""
        try:
            body()
        except BaseException as error:  # handed to Work.wait()
            self._finish(error)
        else:
            self._finish(None)

    def is_completed(self) -> bool:
        return self._done.is_set()

    def wait(self, timeout: float | None = None) -> bool:
        """Block until the collective finished (True), or ``timeout`` seconds passed (False)."""
        if not self._done.wait(timeout):
            return False
        if self._error is not None:
            raise self._error
        return True


_Job = tuple[Callable[[], None], Work] | None


class InOrder:
    """One group's asynchronous collectives, run in issue order on one worker thread (made on
    first use). A blocking collective calls :meth:`drain` first, so every rank runs a group's
    collectives in the order it issued them, whichever are asynchronous."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._queue: queue.SimpleQueue[_Job] | None = None
        self._thread: threading.Thread | None = None
        self._pending: list[Work] = []

    def submit(self, job: Callable[[], None]) -> Work:
        """Queue ``job``; its :class:`Work` finishes with its error (or None)."""
        if self._queue is None:
            self._queue = queue.SimpleQueue()
            self._thread = threading.Thread(
                target=self._serve, args=(self._queue,), name=self.name, daemon=True
            )
            self._thread.start()
        work = Work()
        self._pending.append(work)
        self._queue.put((job, work))
        return work

    @staticmethod
    def _serve(jobs: queue.SimpleQueue[_Job]) -> None:
        while (item := jobs.get()) is not None:
            fn, work = item
            work._complete(fn)

    def drain(self) -> None:
        """Wait for every queued job (their errors surface at their own ``wait``; a
        :class:`~scaleup.errors.ScaleupError` also here, since later collectives would hang)."""
        pending, self._pending = self._pending, []
        for work in pending:
            work._done.wait()
        for work in pending:
            if work._error is not None and isinstance(work._error, ScaleupError):
                raise work._error

    def close(self, timeout_s: float) -> None:
        """Let queued jobs finish (up to ``timeout_s``) and end the worker thread."""
        if self._thread is not None and self._queue is not None:
            self._queue.put(None)
            self._thread.join(timeout=timeout_s)
