"""A small deterministic discrete-event core, shaped like SimPy's ``Environment``.

An :class:`Environment` owns the clock and a heap of ``(time_s, priority, seq, event)``. Ties in
time are broken by a named priority tier, then by insertion order (``seq``), so the same input
always produces the same sequence of events: no epsilons, no wall clock, no module-level state.

The simulator uses three tiers within one instant: :data:`COMPLETE` (transfers that finish), then
:data:`START` (transfers whose latency has elapsed), then :data:`RESOLVE` (one rate recomputation
for everything that changed at that instant), so a symmetric step of n ranks costs one batch.

>>> env = Environment()
>>> log = []
>>> env.schedule(Event(lambda ev: log.append(("b", env.now))), delay=2.0)
>>> env.schedule(Event(lambda ev: log.append(("a", env.now))), delay=2.0, priority=URGENT)
>>> env.run()
>>> log
[('a', 2.0), ('b', 2.0)]
"""

from __future__ import annotations

import heapq
import itertools
import math
from collections.abc import Callable
from typing import Any

from scaleup.errors import EmptySchedule, SimulationError

__all__ = [
    "COMPLETE",
    "NORMAL",
    "RESOLVE",
    "START",
    "URGENT",
    "EmptySchedule",
    "Environment",
    "Event",
]

#: Priority tiers (lower runs first at equal time).
URGENT = 0
COMPLETE = 1
START = 2
NORMAL = 3
RESOLVE = 4


class Event:
    """Something that happens at an instant: its callbacks run with the event as argument.

    ``cancel()`` marks a scheduled event stale; the environment then drops it unprocessed (the
    simulator cancels a predicted completion when rates change before it).
    """

    __slots__ = ("callbacks", "cancelled", "value")

    def __init__(self, callback: Callable[[Event], Any] | None = None, value: Any = None) -> None:
        self.callbacks: list[Callable[[Event], Any]] = [callback] if callback is not None else []
        self.value = value
        self.cancelled = False

    def cancel(self) -> None:
        self.cancelled = True


class Environment:
    """The clock and the event heap.

    Parameters
    ----------
    initial_time
        Simulated time of the start, seconds.
    """

    def __init__(self, initial_time: float = 0.0) -> None:
        self._now = float(initial_time)
        self._queue: list[tuple[float, int, int, Event]] = []
        self._seq = itertools.count()

    @property
    def now(self) -> float:
        """Current simulated time, seconds."""
        return self._now

    def schedule(self, event: Event, delay: float = 0.0, priority: int = NORMAL) -> None:
        """Schedule ``event`` at ``now + delay`` in tier ``priority``."""
        if not delay >= 0.0:
            raise SimulationError(f"delay must be >= 0, got {delay}")
        heapq.heappush(self._queue, (self._now + delay, priority, next(self._seq), event))

    def schedule_at(self, event: Event, time_s: float, priority: int = NORMAL) -> None:
        """Schedule ``event`` at absolute time ``time_s`` (>= now)."""
        if not time_s >= self._now:
            raise SimulationError(f"time {time_s} is before now ({self._now})")
        heapq.heappush(self._queue, (time_s, priority, next(self._seq), event))

    def peek(self) -> float:
        """Time of the next live event, ``inf`` if none."""
        queue = self._queue
        while queue and queue[0][3].cancelled:
            heapq.heappop(queue)
        return queue[0][0] if queue else math.inf

    @property
    def n_queued(self) -> int:
        """Events in the heap, cancelled ones not yet dropped included (a cheap upper bound on
        the live ones)."""
        return len(self._queue)

    def live(self) -> list[tuple[float, int, Event]]:
        """The scheduled events not cancelled, as ``(time_s, priority, event)`` in the order they
        would run."""
        return [(t, p, e) for t, p, _, e in sorted(self._queue) if not e.cancelled]

    def jump(self, time_s: float) -> None:
        """Move the clock forward to ``time_s`` without running anything: no live event may be
        due before it (a run that fast-forwards cancels and reschedules its events first)."""
        if not time_s >= self._now:
            raise SimulationError(f"time {time_s} is before now ({self._now})")
        if self.peek() < time_s:
            raise SimulationError(f"an event is due at {self.peek()}, before {time_s}")
        self._now = float(time_s)

    def step(self) -> None:
        """Process the next live event; raise :class:`EmptySchedule` if there is none."""
        if not self._step():
            raise EmptySchedule("no events left")

    def _step(self) -> bool:
        """Process the next live event; False if there is none."""
        queue = self._queue
        while queue:
            time_s, _, _, event = heapq.heappop(queue)
            if event.cancelled:
                continue
            self._now = time_s
            for callback in event.callbacks:
                callback(event)
            return True
        return False

    def run(self, until: float | None = None) -> None:
        """Process events until none is left, or until simulated time would pass ``until``."""
        if until is not None and until < self._now:
            raise SimulationError(f"until ({until}) must be >= the current time ({self._now})")
        if until is None:  # no peek before each step: the simulator's whole run goes here
            while self._step():
                pass
            return
        limit = float(until)
        while self.peek() <= limit and self._queue:
            self.step()
        if until is not None:
            self._now = max(self._now, limit)
