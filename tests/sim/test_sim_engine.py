"""The event core: ordering by (time, priority tier, insertion), run(until), errors."""

from __future__ import annotations

import math

import pytest

from scaleup.errors import SimulationError
from scaleup.sim.engine import COMPLETE, RESOLVE, START, EmptySchedule, Environment, Event


def test_ties_broken_by_tier_then_insertion_order() -> None:
    env = Environment()
    log: list[str] = []
    for name, prio in (
        ("resolve", RESOLVE),
        ("start-a", START),
        ("complete", COMPLETE),
        ("start-b", START),
    ):
        env.schedule(Event(lambda ev: log.append(ev.value), name), delay=1.0, priority=prio)
    env.run()
    assert log == ["complete", "start-a", "start-b", "resolve"]
    assert env.now == 1.0


def test_cancelled_events_are_skipped_and_peek_sees_live_ones() -> None:
    env = Environment()
    log: list[float] = []
    stale = Event(lambda ev: log.append(-1.0))
    env.schedule(stale, delay=1.0)
    env.schedule(Event(lambda ev: log.append(env.now)), delay=2.0)
    stale.cancel()
    assert env.peek() == 2.0
    env.run()
    assert log == [2.0]
    assert env.peek() == math.inf


def test_run_until_stops_before_later_events() -> None:
    env = Environment()
    log: list[float] = []
    for d in (1.0, 3.0):
        env.schedule(Event(lambda ev: log.append(env.now)), delay=d)
    env.run(until=2.0)
    assert log == [1.0]
    assert env.now == 2.0
    env.run()
    assert log == [1.0, 3.0]


def test_events_scheduled_from_callbacks_run_in_the_same_instant() -> None:
    env = Environment()
    log: list[str] = []

    def first(ev: Event) -> None:
        log.append("first")
        env.schedule(Event(lambda e: log.append("same-instant")), delay=0.0, priority=RESOLVE)

    env.schedule(Event(first), delay=0.5)
    env.run()
    assert log == ["first", "same-instant"]
    assert env.now == 0.5


def test_errors() -> None:
    env = Environment()
    with pytest.raises(EmptySchedule):
        env.step()
    with pytest.raises(SimulationError):
        env.schedule(Event(), delay=-1.0)
    env.schedule(Event(), delay=1.0)
    env.run()
    with pytest.raises(SimulationError):
        env.run(until=0.5)
    with pytest.raises(SimulationError):
        env.schedule_at(Event(), 0.1)


def test_live_lists_uncancelled_events_in_run_order_and_jump_moves_the_clock() -> None:
    env = Environment()
    late, early, stale = Event(value="late"), Event(value="early"), Event(value="stale")
    env.schedule(late, delay=3.0, priority=START)
    env.schedule(early, delay=1.0, priority=RESOLVE)
    env.schedule(stale, delay=0.5)
    stale.cancel()
    assert env.live() == [(1.0, RESOLVE, early), (3.0, START, late)]
    assert env.n_queued == 3  # the cancelled one is still in the heap
    env.jump(1.0)  # up to the first live event, not past it
    assert env.now == 1.0
    with pytest.raises(SimulationError, match="due at 1.0"):
        env.jump(2.0)
    with pytest.raises(SimulationError, match="before now"):
        env.jump(0.5)
    early.cancel()
    env.jump(2.0)
    assert env.now == 2.0
