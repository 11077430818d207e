"""The verifier catches broken schedules and names the op: mutation tests and hand-made errors."""

from __future__ import annotations

import numpy as np
import pytest

from scaleup.collectives.algorithms import ALGORITHMS, build_schedule
from scaleup.collectives.build import ScheduleBuilder
from scaleup.collectives.schedule import Buffer, Chunk, Op, OpKind, OpTable, Schedule
from scaleup.collectives.spec import CollectiveSpec
from scaleup.collectives.verify import VerifyReport, topological_order, verify
from scaleup.errors import (
    BoundsError,
    CycleError,
    PostconditionError,
    RaceError,
    UnwrittenReadError,
)  # fmt: skip

SMALL = [
    (name, collective)
    for name, algorithm in ALGORITHMS.items()
    for collective in algorithm.collectives
]


def _small(name: str, collective: str) -> Schedule:
    params = {"ranks_per_node": 2} if name == "hierarchical" else {}
    return build_schedule(name, CollectiveSpec(collective, nranks=4, count=11, root=1), **params)


@pytest.mark.parametrize(("name", "collective"), SMALL)
def test_dropping_any_op_is_caught(name: str, collective: str) -> None:
    """Every op is needed: drop any one and verify raises (unwritten read or postcondition)."""
    schedule = _small(name, collective)
    verify(schedule, "int32")
    for op_id in range(schedule.n_ops):
        with pytest.raises((UnwrittenReadError, PostconditionError)):
            verify(schedule.without_op(op_id), "int32")


@pytest.mark.parametrize("name", ["ring", "tree", "recursive", "direct", "hierarchical"])
def test_removing_a_dependency_makes_a_race(name: str) -> None:
    """Remove a dependency of an op on what it reads or writes: a RaceError naming both."""
    params = {"ranks_per_node": 2} if name == "hierarchical" else {}
    schedule = build_schedule(name, CollectiveSpec("all_reduce", nranks=4, count=16), **params)
    caught = 0
    for op in schedule.ops:
        for dep in op.deps:
            writer = schedule.op(dep)
            if any(_overlap(c, d) for c in (*op.srcs, *op.dsts) for d in writer.dsts):
                with pytest.raises(RaceError) as info:
                    verify(schedule.without_dep(op.id, dep), "int32")
                assert f"op {dep}" in str(info.value)
                assert f"op {op.id}" in str(info.value)
                caught += 1
    assert caught > 0


def _overlap(a: Chunk, b: Chunk) -> bool:
    return (
        (a.rank, a.buffer) == (b.rank, b.buffer)
        and a.offset < b.offset + b.count
        and b.offset < a.offset + a.count
    )


def _table(*ops: Op) -> OpTable:
    return OpTable.from_ops(list(ops))


def test_unordered_writes_race() -> None:
    spec = CollectiveSpec("broadcast", nranks=2, count=4)
    b = ScheduleBuilder(spec, "racy")
    b.copy(b.input(0, 0, 4), b.output(0, 0, 4), deps=[])
    b.copy(b.input(0, 0, 4), b.output(1, 0, 4), deps=[])
    b.copy(b.input(0, 0, 2), b.output(1, 0, 2), deps=[])  # overlaps op 1, no order
    with pytest.raises(RaceError, match="op 1 and op 2 both touch r1.output"):
        verify(b.build(), "int32")


def test_unwritten_read_names_op_and_chunk() -> None:
    spec = CollectiveSpec("broadcast", nranks=2, count=4)
    b = ScheduleBuilder(spec, "unwritten")
    b.copy(b.output(0, 0, 4), b.output(1, 0, 4), deps=[])
    with pytest.raises(UnwrittenReadError, match=r"op 0 reads r0.output\[0:4\]") as info:
        verify(b.build())
    assert info.value.op == 0


def test_out_of_bounds_chunk() -> None:
    spec = CollectiveSpec("all_reduce", nranks=2, count=4)
    b = ScheduleBuilder(spec, "oob")
    b.copy(b.input(0, 0, 4), b.output(0, 0, 4), deps=[])
    b.copy(b.input(1, 2, 4), b.output(1, 0, 4), deps=[])
    with pytest.raises(
        BoundsError, match=r"op 1: chunk r1.input\[2:6\] lies outside input \(4 elements\)"
    ):
        verify(b.build())


def test_mutated_chunk_out_of_bounds() -> None:
    schedule = build_schedule("ring", CollectiveSpec("all_gather", nranks=3, count=9))
    ops = list(schedule.ops)
    bad = ops[4]
    dst = bad.dsts[0]
    ops[4] = Op(
        bad.id,
        bad.kind,
        bad.rank,
        bad.srcs,
        (Chunk(dst.rank, dst.buffer, 8, dst.count),),
        bad.deps,
        bad.channel,
        bad.step,
    )
    with pytest.raises(BoundsError) as info:
        verify(Schedule(schedule.spec, "ring", OpTable.from_ops(ops)))
    assert info.value.op == 4


def test_cycle_is_named() -> None:
    spec = CollectiveSpec("send_recv", nranks=2, count=2)
    ops = [
        Op(
            0,
            OpKind.COPY,
            0,
            (Chunk(0, Buffer.INPUT, 0, 2),),
            (Chunk(1, Buffer.OUTPUT, 0, 2),),
            (2,),
        ),
        Op(
            1, OpKind.COPY, 1, (Chunk(1, Buffer.INPUT, 0, 2),), (Chunk(0, Buffer.OUTPUT, 0, 2),), ()
        ),
        Op(
            2,
            OpKind.COPY,
            1,
            (Chunk(1, Buffer.INPUT, 0, 1),),
            (Chunk(1, Buffer.SCRATCH, 0, 1),),
            (0,),
        ),
    ]
    schedule = Schedule(spec, "cyclic", _table(*ops), scratch_count=1)
    with pytest.raises(CycleError, match="dependency cycle: op (0|2) -> op (0|2) -> op (0|2)"):
        verify(schedule)


def test_topological_order_handles_forward_deps() -> None:
    spec = CollectiveSpec("send_recv", nranks=2, count=2)
    ops = [
        Op(
            0,
            OpKind.COPY,
            0,
            (Chunk(0, Buffer.SCRATCH, 0, 2),),
            (Chunk(1, Buffer.OUTPUT, 0, 2),),
            (1,),
        ),
        Op(
            1,
            OpKind.COPY,
            0,
            (Chunk(0, Buffer.INPUT, 0, 2),),
            (Chunk(0, Buffer.SCRATCH, 0, 2),),
            (),
        ),
        Op(
            2, OpKind.COPY, 1, (Chunk(1, Buffer.INPUT, 0, 2),), (Chunk(0, Buffer.OUTPUT, 0, 2),), ()
        ),
    ]
    schedule = Schedule(spec, "forward", _table(*ops), scratch_count=2)
    assert list(topological_order(schedule)).index(1) < list(topological_order(schedule)).index(0)
    verify(schedule, "int32")


def test_postcondition_names_rank_index_and_writer() -> None:
    spec = CollectiveSpec("all_reduce", nranks=2, count=4)
    b = ScheduleBuilder(spec, "no-reduce")
    b.copy(b.input(0, 0, 4), b.output(0, 0, 4))
    b.copy(b.input(1, 0, 4), b.output(1, 0, 4))
    with pytest.raises(
        PostconditionError,
        match=r"rank 0 output\[\d+\] is -?\d+, expected -?\d+ \(last written by op 0",
    ):
        verify(b.build(), "int32")


def test_never_written_output() -> None:
    spec = CollectiveSpec("all_gather", nranks=2, count=4)
    b = ScheduleBuilder(spec, "half")
    b.copy(b.input(0, 0, 2), b.output(0, 0, 2))
    with pytest.raises(PostconditionError, match=r"rank 0 output\[2\] was never written"):
        verify(b.build())


def test_float_tolerance_and_report() -> None:
    s = build_schedule("ring", CollectiveSpec("all_reduce", nranks=16, count=257))
    report = verify(s, "float16")
    assert isinstance(report, VerifyReport)
    assert "eps=0.000977" in report.tolerance
    assert report.ranks_checked == 16
    assert report.to_dict()["n_ops"] == s.n_ops
    assert verify(s, "int32").tolerance == "exact"


def test_float_error_beyond_tolerance_is_caught() -> None:
    """A wrong float sum (a contribution counted twice) fails despite the float tolerance."""
    spec = CollectiveSpec("all_reduce", nranks=2, count=8)
    b = ScheduleBuilder(spec, "double")
    for r in range(2):
        b.copy(b.input(r, 0, 8), b.output(r, 0, 8))
        b.reduce(b.input(1 - r, 0, 8), b.output(r, 0, 8))
        b.reduce(b.input(1 - r, 0, 8), b.output(r, 0, 8))
    with pytest.raises(PostconditionError):
        verify(b.build(), "float32", seed=3)


def test_verify_large_ring() -> None:
    """The bench case at a smaller size: 64 ranks, 64K float32 (speed: bench/bench_verify.py)."""
    s = build_schedule("ring", CollectiveSpec("all_reduce", nranks=64, count=1 << 16))
    verify(s)


def test_inputs_written_by_a_schedule_do_not_fool_the_reference() -> None:
    spec = CollectiveSpec("broadcast", nranks=2, count=3)
    b = ScheduleBuilder(spec, "clobber")
    b.copy(b.input(0, 0, 3), b.output(0, 0, 3))
    b.copy(b.input(0, 0, 3), b.output(1, 0, 3))
    b.copy(b.input(1, 0, 3), b.input(0, 0, 3))  # overwrites the root's input afterwards
    verify(b.build(), "int32")
    assert np.dtype("int32").kind == "i"


def test_misaligned_chunks_race_only_without_an_order() -> None:
    """Chunks that overlap part of each other (ends 0, 4, 6, 8 on one buffer): the shadow's
    atoms are every end any op names, so a partial overlap is a race when unordered and fine
    when ordered."""
    spec = CollectiveSpec("all_gather", nranks=2, count=8)
    for ordered in (True, False):
        b = ScheduleBuilder(spec, "partial", infer_deps=False)
        first = b.copy(b.input(0, 0, 4), b.output(0, 0, 4), deps=[])
        second = b.copy(b.input(1, 0, 4), b.output(0, 4, 4), deps=[])
        mid = b.copy(b.output(0, 2, 4), b.output(1, 2, 4), deps=[first, second][: 1 + ordered])
        b.copy(b.input(0, 0, 2), b.output(1, 0, 2), deps=[])
        b.copy(b.input(1, 2, 2), b.output(1, 6, 2), deps=[mid])
        if ordered:
            verify(b.build(), "int32")
        else:
            with pytest.raises(RaceError, match="a write and a read"):
                verify(b.build(), "int32")


def test_a_shadow_cuts_an_end_it_was_not_given() -> None:
    """An end outside the precomputed atoms (a caller outside the replay) is cut in: the new
    atoms inherit their writer and readers."""
    from scaleup.collectives.hazards import UNWRITTEN, Shadow

    sh = Shadow(10, UNWRITTEN, [4])
    sh.writer[0], sh.readers[1] = 7, [3]
    assert sh.span(0, 4) == (0, 1)
    assert sh.span(2, 7) == (1, 3)
    assert sh.pts == [0, 2, 4, 7, 10]
    assert sh.writer == [7, 7, UNWRITTEN, UNWRITTEN]
    assert sh.readers[3] == [3]
    assert sh.writer_at(8) == UNWRITTEN
