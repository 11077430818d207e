"""collective_time_s: the tuned time of one collective over a group of accelerators."""

from __future__ import annotations

import pytest

from scaleup.errors import UsageError
from scaleup.topology import resolve_topology
from scaleup.tune import CollectiveTimer, TuneSession, collective_time_s, tune

MIB = 1 << 20


def test_whole_topology_equals_the_tuner():
    topology = resolve_topology("dgx-h100")
    assert collective_time_s(topology, "all_reduce", 64 * MIB) == pytest.approx(
        tune(topology, "all_reduce", 64 * MIB).time_s
    )


def test_a_group_across_servers_is_slower_than_one_inside_a_server():
    topology = resolve_topology("2xdgx-h100")
    inside = collective_time_s(topology, "all_reduce", 64 * MIB, ranks=[0, 1])
    across = collective_time_s(topology, "all_reduce", 64 * MIB, ranks=[0, 8])
    assert across > 2 * inside  # a 400 Gb/s NIC against 18 NVLinks


def test_one_rank_costs_nothing_and_bad_groups_are_usage_errors():
    topology = resolve_topology("dgx-h100")
    assert collective_time_s(topology, "all_reduce", MIB, ranks=[3]) == 0.0
    with pytest.raises(UsageError, match="distinct"):
        collective_time_s(topology, "all_reduce", MIB, ranks=[0, 0])
    with pytest.raises(UsageError, match="0..7"):
        collective_time_s(topology, "all_reduce", MIB, ranks=[0, 8])
    with pytest.raises(UsageError, match="at least one"):
        collective_time_s(topology, "all_reduce", MIB, ranks=[])


def test_a_timer_keeps_one_session_and_answers_the_same():
    """The planner's timer reuses its session: the second question compiles nothing new."""
    topology = resolve_topology("dgx-h100")
    timer = CollectiveTimer(TuneSession())
    first = timer(topology, "all_reduce", 64 * MIB, ranks=[0, 1, 2, 3])
    checked = len(timer.session.checked)
    assert timer(topology, "all_reduce", 64 * MIB, ranks=[0, 1, 2, 3]) == first
    assert len(timer.session.checked) == checked
    assert first == collective_time_s(topology, "all_reduce", 64 * MIB, ranks=[0, 1, 2, 3])
