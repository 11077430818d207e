"""The load/store plans execute every op as the op semantics define it, aliasing included.

One rank, input and output bound to the same memory (in place): random ops whose chunks overlap
any which way, some chained into one destination so that the plan fuses them, with tiny cache
blocks so that blocking is exercised. The plan must leave memory exactly as replaying the ops one
by one with :func:`~scaleup.collectives.semantics.apply_op` does.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scaleup.collectives.schedule import Buffer, Chunk, Op, OpKind, OpTable, Schedule
from scaleup.collectives.semantics import apply_op
from scaleup.collectives.spec import CollectiveSpec
from scaleup.runtime import execute
from scaleup.runtime.shm import ControlBlock, Waiter
from strategies import AliasedOp, aliased_ops

SIZE = 32


def _chained(draw: st.DrawFn, ops: list[AliasedOp]) -> list[AliasedOp]:
    """Make some ops reduces into their predecessor's destination (what the plan fuses)."""
    out = [ops[0]]
    for op in ops[1:]:
        prev = out[-1]
        if prev.kind != OpKind.SWITCH_REDUCE and draw(st.booleans()):
            src = draw(st.integers(0, SIZE - prev.count))
            op = AliasedOp(OpKind.REDUCE, prev.count, (src,), prev.dsts[:1])
        out.append(op)
    return out


def _schedule(ops: list[AliasedOp], buffers: list[Buffer]) -> Schedule:
    """Rank 0 does every op in order; chunks alternate between input and output (one memory)."""
    pick = iter(buffers)
    rows = []
    for i, op in enumerate(ops):
        srcs = tuple(Chunk(0, next(pick), s, op.count) for s in op.srcs)
        dsts = tuple(Chunk(0, next(pick), d, op.count) for d in op.dsts)
        rows.append(Op(i, op.kind, 0, srcs, dsts, (i - 1,) if i else ()))
    return Schedule(CollectiveSpec("all_reduce", 1, SIZE), "random", OpTable.from_ops(rows))


def _check(ops: list[AliasedOp], buffers: list[Buffer], redop: str, block_bytes: int) -> None:
    """The plan's result equals the ops replayed one by one with apply_op."""
    schedule = _schedule(ops, buffers)
    start = np.random.default_rng(len(ops)).integers(-9, 9, size=SIZE).astype(np.int64)
    want = start.copy()
    ufunc = {"sum": np.add, "max": np.maximum, "prod": np.multiply}[redop]
    for op in ops:
        c = op.count
        srcs, dsts = [want[s : s + c] for s in op.srcs], [want[d : d + c] for d in op.dsts]
        apply_op(op.kind, srcs, dsts, ufunc)
    memory = start.copy()
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(execute, "BLOCK_BYTES", block_bytes)
        plan = execute.compile_plan(schedule, 0, lambda rank, buffer: memory, redop, memory.dtype)
    control = ControlBlock(bytearray(ControlBlock.size_bytes(1)), 1)
    plan.run(1, control, Waiter(control, 0, 5.0, threads=True))
    np.testing.assert_array_equal(memory, want)


@settings(max_examples=100)
@given(
    st.data(),
    st.lists(aliased_ops(SIZE), min_size=1, max_size=6),
    st.sampled_from(["sum", "max", "prod"]),
    st.sampled_from([8, 16, 1 << 20]),  # block bytes: 1 or 2 int64 elements, or no blocking
)
def test_plan_equals_apply_op_one_by_one(
    data: st.DataObject, ops: list[AliasedOp], redop: str, block_bytes: int
) -> None:
    ops = _chained(data.draw, ops)
    n_chunks = sum(len(op.srcs) + len(op.dsts) for op in ops)
    side = st.sampled_from([Buffer.INPUT, Buffer.OUTPUT])
    _check(ops, data.draw(st.lists(side, min_size=n_chunks, max_size=n_chunks)), redop, block_bytes)


@pytest.mark.parametrize("block_bytes", [8, 16, 1 << 20])
@pytest.mark.parametrize(
    "ops",
    [
        # copy from just below the destination, then a fused reduce: blocks would smear the copy
        [AliasedOp(OpKind.COPY, 8, (0,), (1,)), AliasedOp(OpKind.REDUCE, 8, (20,), (1,))],
        # a fused reduce whose source overlaps the destination: not fusable
        [AliasedOp(OpKind.COPY, 8, (20,), (0,)), AliasedOp(OpKind.REDUCE, 8, (4,), (0,))],
        # switch_reduce into its second source (nvls reduce to root 1, in place)
        [AliasedOp(OpKind.SWITCH_REDUCE, 8, (0, 8), (8,))],
    ],
)
def test_plan_on_hand_made_aliasing(ops: list[AliasedOp], block_bytes: int) -> None:
    n_chunks = sum(len(op.srcs) + len(op.dsts) for op in ops)
    _check(ops, [Buffer.INPUT, Buffer.OUTPUT] * n_chunks, "sum", block_bytes)
