"""The rate memo of a compiled system: max-min solutions by active variables, within a budget.

A run (:class:`~scaleup.sim.run.Run`) keys every fair-share solve by its active variables'
column classes and counts, and keeps the solution (rates, used constraints, their flows) for
every later run of the same structure and protocol: rates do not depend on message size, so a
sweep over sizes solves each active set once. A hit returns exactly what the solve would (the
key fixes the solve's input), so forgetting an entry costs time, never a different result.

Unbounded, the memo held every solve of a large schedule: at 1,024 ranks (nvls_tree, 16
channels) 4,000 solves of about 1.5 MB each, 6 GB, for a handful of hits. :class:`RateMemo` keeps
the most recently used entries within :data:`MEMO_BUDGET_BYTES`; small schedules (whose entries
are kilobytes) never reach it.
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["MEMO_BUDGET_BYTES", "RateMemo"]

#: Bytes of keys and solutions one memo keeps (one per compiled structure and protocol).
MEMO_BUDGET_BYTES = 128 * 2**20


def _size(key: bytes, value: Any) -> int:
    """Bytes of an entry: its key and the arrays of its solution."""
    arrays = value if isinstance(value, tuple) else (value,)
    return len(key) + sum(a.nbytes for a in arrays if isinstance(a, np.ndarray))


class RateMemo(dict[bytes, Any]):
    """A dict of solutions that forgets the least recently used entries beyond ``budget_bytes``.

    >>> memo = RateMemo(budget_bytes=150)
    >>> memo[b"a"] = (np.zeros(8),)
    >>> memo[b"b"] = (np.zeros(8),)
    >>> _ = memo.get(b"a")  # used: b is now the oldest
    >>> memo[b"c"] = (np.zeros(8),)
    >>> sorted(memo), memo.nbytes
    ([b'a', b'c'], 130)
    """

    def __init__(self, budget_bytes: int = MEMO_BUDGET_BYTES) -> None:
        super().__init__()
        self.budget_bytes = budget_bytes
        self.nbytes = 0

    def get(self, key: bytes, default: Any = None) -> Any:
        """The entry (now the most recently used), or ``default``."""
        if key not in self:
            return default
        value = super().pop(key)
        super().__setitem__(key, value)
        return value

    def __setitem__(self, key: bytes, value: Any) -> None:
        if key in self:
            self.nbytes -= _size(key, super().pop(key))
        super().__setitem__(key, value)
        self.nbytes += _size(key, value)
        while self.nbytes > self.budget_bytes and len(self) > 1:
            oldest = next(iter(self))
            self.nbytes -= _size(oldest, super().pop(oldest))
