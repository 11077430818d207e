"""The handle of an asynchronous collective (``async_op=True``) or point-to-point message."""

from __future__ import annotations

import threading
from collections.abc import Callable

__all__ = ["Work"]


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
