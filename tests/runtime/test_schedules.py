"""Which schedule the runtime runs: the library's, verified, aliased only when verify says so."""

from __future__ import annotations

import pytest
import runtime_workers as workers
from matrix_workers import RUNTIME_COLLECTIVES

from scaleup.collectives.algorithms import build_schedule
from scaleup.collectives.schedule import Op, OpTable, Schedule
from scaleup.collectives.spec import CollectiveSpec
from scaleup.errors import ScheduleError, UsageError
from scaleup.runtime import launch, schedules
from scaleup.runtime.schedules import (
    check_id_order,
    in_place_safe,
    parse_algorithm,
    select_schedule,
)  # fmt: skip


@pytest.mark.parametrize("transport", ["shm", "local", "pipe"])
def test_issue_10_nvls_in_place(transport: str) -> None:
    """reduce to root 1 (shm, local, pipe) and all_reduce on pipe returned wrong sums."""
    reduced = launch(workers.issue_10_example, 2, "reduce", 1, transport=transport, timeout_s=20)
    assert reduced == [[1] * 4, [11] * 4]  # was [2, 2, 2, 2] at rank 1
    reduced = launch(workers.issue_10_example, 3, "reduce", 2, transport=transport, timeout_s=20)
    assert reduced == [[1] * 4, [10] * 4, [111] * 4]
    summed = launch(workers.issue_10_example, 3, "all_reduce", 0, transport=transport, timeout_s=20)
    assert summed == [[111] * 4] * 3


@pytest.mark.parametrize("collective", RUNTIME_COLLECTIVES)
def test_the_runtime_direct_is_the_library_direct(collective: str) -> None:
    spec = CollectiveSpec(collective, 3, 10, root=1)
    schedule, _ = select_schedule(spec, None, 4)
    assert schedule.to_dict() == build_schedule("direct", spec).to_dict()


@pytest.mark.parametrize("count", [16384, 16385, 65536, 65537])
def test_one_shot_threshold_is_the_librarys_in_bytes(count: int) -> None:
    """float32: the runtime and the library agree; 8-byte elements reach the bytes limit sooner."""
    spec = CollectiveSpec("all_reduce", 2, count)
    library = build_schedule("direct", spec).params["shot"]
    assert select_schedule(spec, None, 4)[0].params["shot"] == library
    assert select_schedule(spec, "direct", 8)[0].params["shot"] == (1 if count <= 32768 else 2)


def test_algorithm_parameters_in_the_name() -> None:
    assert parse_algorithm(None) == ("direct", {})
    assert parse_algorithm("ring: channels=2, bidirectional=true, x=auto") == (
        "ring",
        {"channels": 2, "bidirectional": True, "x": "auto"},
    )
    spec = CollectiveSpec("all_reduce", 4, 12)
    schedule, _ = select_schedule(spec, "hierarchical:ranks_per_node=2", 4)
    assert schedule.params["ranks_per_node"] == 2
    with pytest.raises(UsageError, match="not key=value"):
        parse_algorithm("ring:channels")
    with pytest.raises(UsageError, match="unknown parameter 'shots'"):
        select_schedule(CollectiveSpec("all_reduce", 2, 4), "direct:shots=2", 4)


def test_in_place_safe_is_verify_in_place() -> None:
    nvls = build_schedule("nvls", CollectiveSpec("reduce", 3, 7, root=2))
    assert in_place_safe(nvls)  # its op writes a source it reads: fine, every transport reads first
    one_shot = build_schedule("direct", CollectiveSpec("all_reduce", 3, 7), shot=1)
    assert not in_place_safe(one_shot)  # a peer still reads the input its owner overwrites
    assert not in_place_safe(build_schedule("ring", CollectiveSpec("all_gather", 3, 9)))


def test_a_schedule_that_fails_verification_never_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    spec = CollectiveSpec("all_reduce", 3, 5, redop="max")  # not cached: no other test uses it
    broken = build_schedule("ring", spec).without_op(0)
    monkeypatch.setattr(schedules, "build_schedule", lambda *args, **kwargs: broken)
    with pytest.raises(ScheduleError):
        select_schedule(spec, "ring", 4)


def test_ops_must_follow_their_dependencies_in_id_order() -> None:
    schedule = build_schedule("direct", CollectiveSpec("broadcast", 2, 4))
    check_id_order(schedule)
    ops = list(schedule.ops)
    first = ops[0]
    ops[0] = Op(first.id, first.kind, first.rank, first.srcs, first.dsts, (1,))
    with pytest.raises(ScheduleError, match="op 0 depends on op 1"):
        check_id_order(Schedule(schedule.spec, "direct", OpTable.from_ops(ops)))
