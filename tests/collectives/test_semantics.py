"""The op semantics (read every operand, then write) on aliased chunks: the one definition."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from scaleup.collectives.schedule import OpKind
from scaleup.collectives.semantics import accumulate, apply_op, combine, needs_stage
from strategies import AliasedOp, aliased_ops

UFUNCS = [np.add, np.multiply, np.maximum, np.minimum]


def _by_definition(memory: np.ndarray, op: AliasedOp, ufunc: np.ufunc) -> np.ndarray:
    """The module docstring, literally: snapshot every operand, compute, then store."""
    out = memory.copy()
    c = op.count
    srcs = [memory[s : s + c].copy() for s in op.srcs]
    if op.kind == OpKind.COPY:
        value = srcs[0]
    elif op.kind == OpKind.REDUCE:
        value = ufunc(memory[op.dsts[0] : op.dsts[0] + c], srcs[0])
    else:
        value = srcs[0]
        for s in srcs[1:]:
            value = ufunc(value, s)
    for d in op.dsts:
        out[d : d + c] = value
    return out


@settings(max_examples=300)  # microseconds each
@given(aliased_ops(), st.sampled_from(UFUNCS), st.integers(0, 2**32 - 1))
@example(AliasedOp(OpKind.SWITCH_REDUCE, 4, (0, 4), (4,)), np.add, 0)  # nvls reduce, root 1
def test_apply_op_reads_every_operand_before_writing(
    op: AliasedOp, ufunc: np.ufunc, seed: int
) -> None:
    memory = np.random.default_rng(seed).integers(-50, 50, size=32).astype(np.int64)
    want = _by_definition(memory, op, ufunc)
    c = op.count
    apply_op(
        op.kind, [memory[s : s + c] for s in op.srcs], [memory[d : d + c] for d in op.dsts], ufunc
    )
    np.testing.assert_array_equal(memory, want)


def test_switch_reduce_into_one_of_its_sources() -> None:
    """Issue 10's case: nvls reduce to root 1 in place; root 1's buffer is source and dest."""
    in0, in1 = np.full(4, 1, np.int64), np.full(4, 10, np.int64)
    apply_op(OpKind.SWITCH_REDUCE, [in0, in1], [in1], np.add)
    assert in1.tolist() == [11, 11, 11, 11]  # not [2, 2, 2, 2]: in0 copied over in1 first


def test_needs_stage_only_for_operands_read_after_the_first_store() -> None:
    memory = np.zeros(12)
    a, b, c = memory[0:4], memory[4:8], memory[8:12]
    assert needs_stage(b, a, [b])  # acc := a; acc += b would read b after overwriting it
    assert not needs_stage(a, a, [b])  # the first copy reads a before writing (numpy buffers)
    assert not needs_stage(a, None, [a[::-1]])  # one ufunc call: its input is read first
    assert needs_stage(a, None, [b, memory[2:6]])  # the second operand overlaps the acc
    assert not needs_stage(c, a, [b])


@pytest.mark.parametrize("first", [True, False])
def test_blocked_accumulation_equals_unblocked(first: bool) -> None:
    rng = np.random.default_rng(1)
    operands = [rng.integers(-9, 9, size=37) for _ in range(3)]
    plain, blocked = np.arange(37), np.arange(37)
    head = operands[0] if first else None
    accumulate(plain, head, operands[1:], np.add)
    accumulate(blocked, head, operands[1:], np.add, block=5)
    np.testing.assert_array_equal(blocked, plain)


def test_combine_with_a_stage_writes_every_destination() -> None:
    memory = np.arange(12, dtype=np.int64)
    src0, src1 = memory[0:4].copy(), memory[4:8]
    dsts = [memory[4:8], memory[8:12]]
    combine(dsts, src0, [src1], np.add, stage=np.empty(4, np.int64))
    assert memory[4:8].tolist() == memory[8:12].tolist() == [4, 6, 8, 10]


def test_numpy_reads_overlapping_inputs_first() -> None:
    """What the module relies on: one copyto / ufunc call acts as if its inputs were copied."""
    a = np.arange(10)
    np.copyto(a[2:10], a[0:8])
    assert a.tolist() == [0, 1, 0, 1, 2, 3, 4, 5, 6, 7]
    b = np.arange(10)
    np.add(b[2:10], b[0:8], out=b[2:10])
    assert b.tolist() == [0, 1, 2, 4, 6, 8, 10, 12, 14, 16]


@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.int32, np.int8])
@pytest.mark.parametrize("ufunc", UFUNCS)
def test_a_many_source_reduction_adds_left_to_right(dtype, ufunc) -> None:
    """72 sources (an in-switch reduction over an NVL72 rack), one element or many: the result
    is srcs[0] op srcs[1] op ... bit for bit, floats included (integers, max and min take one
    stacked call, where the order cannot matter)."""
    rng = np.random.default_rng(3)
    for n in (1, 3, 1000):
        srcs = [(rng.standard_normal(n) * 40).astype(dtype) for _ in range(72)]
        want = srcs[0].copy()
        with np.errstate(over="ignore"):
            for s in srcs[1:]:
                want = ufunc(want, s)
            outs = [np.empty(n, dtype) for _ in range(3)]
            apply_op(OpKind.SWITCH_REDUCE, srcs, outs, ufunc)
        for out in outs:
            assert out.tobytes() == want.tobytes()
