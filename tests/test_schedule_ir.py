"""The Schedule IR, its builder, JSON form and the collective specs (hand-worked answers)."""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from scaleup.collectives.build import ScheduleBuilder
from scaleup.collectives.schedule import Buffer, Chunk, Op, OpKind, OpTable, Schedule
from scaleup.collectives.spec import COLLECTIVES, CollectiveSpec, busbw_factor, numpy_dtype
from scaleup.errors import InputError, ScheduleError, UsageError


def halves_all_reduce() -> Schedule:
    """2-rank all_reduce: each rank reduces one half, then puts it to its peer."""
    b = ScheduleBuilder(CollectiveSpec("all_reduce", nranks=2, count=4), "halves")
    for r in range(2):
        b.copy(b.input(r, 0, 4), b.output(r, 0, 4))
    for r in range(2):
        b.reduce(b.input(1 - r, 2 * r, 2), b.output(r, 2 * r, 2))
    for r in range(2):
        b.copy(b.output(r, 2 * r, 2), b.output(1 - r, 2 * r, 2))
    return b.build()


def test_builder_infers_read_after_write_and_write_after_write():
    s = halves_all_reduce()
    assert s.n_ops == 6
    assert s.op(2).deps == (0,)  # reduce into r0.output[0:2] after r0's initial copy
    assert set(s.op(4).deps) == {
        0,
        1,
        2,
    }  # put r0.output[0:2] -> r1: after r0 reduced, after r1's copy
    assert s.op(4).kind is OpKind.COPY
    assert s.op(4).rank == 0  # a put by default


def test_traffic_accounting_halves():
    s = halves_all_reduce()
    # each rank receives half its buffer for reducing and half reduced: 2 + 2 elements of 4 bytes
    assert s.bytes_sent_per_rank(4).tolist() == [16, 16]
    assert s.bytes_received_per_rank(4).tolist() == [16, 16]


def test_switch_reduce_accounting_counts_each_source_and_destination_once():
    b = ScheduleBuilder(CollectiveSpec("all_reduce", nranks=4, count=8), "nvls")
    b.switch_reduce([b.input(r, 0, 8) for r in range(4)], [b.output(r, 0, 8) for r in range(4)])
    s = b.build()
    assert s.bytes_sent_per_rank(2).tolist() == [16] * 4
    assert s.bytes_received_per_rank(2).tolist() == [16] * 4


def test_json_round_trip_is_exact():
    s = halves_all_reduce()
    data = json.loads(s.to_json())
    assert isinstance(data["ops"], list)
    again = Schedule.from_json(s.to_json())
    assert again.to_dict() == s.to_dict()
    assert str(again) == str(s)


def test_bad_json_names_the_op():
    data = halves_all_reduce().to_dict()
    data["ops"][3]["kind"] = "teleport"
    with pytest.raises(InputError, match=r"ops\[3\]"):
        Schedule.from_dict(data, source="x.json")
    with pytest.raises(InputError, match="not JSON"):
        Schedule.from_json("{", source="x.json")


@pytest.mark.parametrize("bad", ["8", 0, -2, 1.5, True])
def test_a_bad_graph_channels_param_is_rejected_naming_it(bad):
    """The simulator reads ``params.graph_channels`` (NCCL's per-graph-channel caps), so a
    file's value is checked as the builders check it; a good one loads."""
    data = halves_all_reduce().to_dict()
    data["params"] = {**data.get("params", {}), "graph_channels": bad}
    with pytest.raises(InputError, match=r"x.json: params.graph_channels: .*integer >= 1"):
        Schedule.from_dict(data, source="x.json")
    data["params"]["graph_channels"] = 2
    assert Schedule.from_dict(data).params["graph_channels"] == 2


def test_rank_out_of_range_is_rejected_naming_the_op():
    data = halves_all_reduce().to_dict()
    data["ops"][5]["dsts"][0][0] = 7
    with pytest.raises(ScheduleError, match="op 5"):
        Schedule.from_dict(data)


def test_dependency_on_missing_op_is_rejected():
    data = halves_all_reduce().to_dict()
    data["ops"][1]["deps"] = [42]
    with pytest.raises(ScheduleError, match="does not exist"):
        Schedule.from_dict(data)


def test_builder_rejects_mixed_counts_and_forward_deps():
    b = ScheduleBuilder(CollectiveSpec("all_reduce", nranks=2, count=4), "bad")
    with pytest.raises(ScheduleError, match="one count"):
        b.copy(b.input(0, 0, 2), b.output(1, 0, 3))
    with pytest.raises(ScheduleError, match="earlier"):
        b.copy(b.input(0, 0, 2), b.output(1, 0, 2), deps=[5])


def test_without_op_and_without_dep():
    s = halves_all_reduce()
    dropped = s.without_op(2)
    assert dropped.n_ops == 5
    assert 0 in dropped.op(3).deps  # op 4 inherited op 2's dependency on op 0
    cut = s.without_dep(4, 2)
    assert 2 not in cut.op(4).deps
    with pytest.raises(ScheduleError):
        s.without_dep(0, 1)


def test_ops_view_is_lazy_and_indexable():
    s = halves_all_reduce()
    assert len(s.ops) == 6
    assert s.ops[-1] == s.op(5)
    assert [op.id for op in s.ops[1:3]] == [1, 2]
    assert isinstance(s.ops[0], Op)
    with pytest.raises(IndexError):
        s.ops[6]
    assert "r0.input[0:4]" in s.format_ops()


def test_table_is_read_only():
    s = halves_all_reduce()
    with pytest.raises(ValueError, match="read-only"):
        s.table.count[0] = 9


def test_add_batch_matches_single_ops():
    spec = CollectiveSpec("all_gather", nranks=4, count=8)
    single = ScheduleBuilder(spec, "x")
    for r in range(4):
        single.copy(single.input(r, 0, 2), single.output((r + 1) % 4, 2 * r, 2), deps=[])
    batch = ScheduleBuilder(spec, "x")
    ranks = np.arange(4)
    ids = batch.add_batch(
        OpKind.COPY, src_rank=ranks, src_buffer=Buffer.INPUT, src_offset=0,
        dst_rank=(ranks + 1) % 4, dst_buffer=Buffer.OUTPUT, dst_offset=2 * ranks, count=2,
    )  # fmt: skip
    assert ids.tolist() == [0, 1, 2, 3]
    assert batch.build().to_dict() == single.build().to_dict()


def test_add_batch_rejects_forward_dependencies():
    b = ScheduleBuilder(CollectiveSpec("all_reduce", nranks=2, count=2), "x")
    with pytest.raises(ScheduleError, match="not earlier"):
        b.add_batch(OpKind.COPY, src_rank=[0], src_buffer=0, src_offset=0, dst_rank=[1],
                    dst_buffer=1, dst_offset=0, count=1, deps=[[3]])  # fmt: skip


def test_from_ops_requires_ordered_ids():
    op = Op(1, OpKind.COPY, 0, (Chunk(0, Buffer.INPUT, 0, 1),), (Chunk(0, Buffer.OUTPUT, 0, 1),))
    with pytest.raises(ScheduleError, match="in order"):
        OpTable.from_ops([op])


# ---- collective specs: hand-worked postconditions ----------------------------------------------


def test_reference_all_reduce_and_reduce_scatter_by_hand():
    x = [np.array([1, 2, 3, 4], dtype=np.int32), np.array([10, 20, 30, 40], dtype=np.int32)]
    ar = CollectiveSpec("all_reduce", 2, 4).reference(x)
    assert [o.tolist() for o in ar] == [[11, 22, 33, 44]] * 2
    rs = CollectiveSpec("reduce_scatter", 2, 4, redop="max").reference(x)
    assert [o.tolist() for o in rs] == [[10, 20], [30, 40]]


def test_reference_gather_alltoall_broadcast_reduce_sendrecv_by_hand():
    ag = CollectiveSpec("all_gather", 2, 4).reference([np.array([1, 2]), np.array([3, 4])])
    assert [o.tolist() for o in ag] == [[1, 2, 3, 4]] * 2
    a2a = CollectiveSpec("all_to_all", 2, 4).reference(
        [np.array([1, 2, 3, 4]), np.array([5, 6, 7, 8])]
    )
    assert [o.tolist() for o in a2a] == [[1, 2, 5, 6], [3, 4, 7, 8]]
    bc = CollectiveSpec("broadcast", 3, 2, root=1).reference(
        [np.array([0, 0]), np.array([7, 8]), np.array([1, 1])]
    )
    assert [o.tolist() for o in bc] == [[7, 8]] * 3
    red = CollectiveSpec("reduce", 2, 2, root=1, redop="prod").reference(
        [np.array([2, 3]), np.array([4, 5])]
    )
    assert red[0] is None
    assert red[1].tolist() == [8, 15]
    sr = CollectiveSpec("send_recv", 3, 1).reference([np.array([0]), np.array([1]), np.array([2])])
    assert [o.tolist() for o in sr] == [[2], [0], [1]]


@pytest.mark.parametrize(
    ("collective", "factor"),
    [("all_reduce", 1.75), ("all_gather", 0.875), ("reduce_scatter", 0.875), ("all_to_all", 0.875),
     ("broadcast", 1.0), ("reduce", 1.0), ("send_recv", 1.0)],
)  # fmt: skip
def test_busbw_factors_are_nccl_tests(collective, factor):
    assert busbw_factor(collective, 8) == pytest.approx(factor)


@given(
    collective=st.sampled_from(COLLECTIVES),
    nranks=st.integers(1, 16),
    count=st.integers(0, 200),
    dtype=st.sampled_from(["int32", "float32", "float16"]),
)
def test_buffer_sizes_and_inputs_are_consistent(collective, nranks, count, dtype):
    spec = CollectiveSpec(collective, nranks, count)
    inputs = spec.make_inputs(dtype)
    assert len(inputs) == nranks
    assert all(x.shape == (spec.input_count,) and x.dtype == numpy_dtype(dtype) for x in inputs)
    outputs = spec.reference(inputs)
    for out in outputs:
        assert out is None or out.shape == (spec.output_count,)


@pytest.mark.parametrize(
    "kwargs",
    [
        dict(collective="all_scatter", nranks=2, count=1),
        dict(collective="all_reduce", nranks=0, count=1),
        dict(collective="all_reduce", nranks=2, count=-1),
        dict(collective="reduce", nranks=2, count=1, root=2),
        dict(collective="all_reduce", nranks=2, count=1, redop="avg"),
    ],
)
def test_bad_spec_is_a_usage_error(kwargs):
    with pytest.raises(UsageError):
        CollectiveSpec(**kwargs)


def test_unknown_dtype_is_a_usage_error():
    with pytest.raises(UsageError, match="dtype"):
        numpy_dtype("float7")


def test_a_builder_without_inference_requires_dependencies():
    b = ScheduleBuilder(CollectiveSpec("all_reduce", nranks=2, count=2), "x", infer_deps=False)
    first = b.copy(b.input(0, 0, 2), b.output(0, 0, 2), deps=[])
    with pytest.raises(ScheduleError, match="deps="):
        b.reduce(b.input(1, 0, 2), b.output(0, 0, 2))
    b.reduce(b.input(1, 0, 2), b.output(0, 0, 2), deps=[first])
    assert b.build().op(1).deps == (0,)


def test_add_batch_takes_a_kind_per_op():
    b = ScheduleBuilder(CollectiveSpec("all_reduce", nranks=2, count=2), "x", infer_deps=False)
    ids = b.add_batch(
        np.array([OpKind.COPY, OpKind.REDUCE]), src_rank=[0, 1], src_buffer=Buffer.INPUT,
        src_offset=0, dst_rank=[0, 0], dst_buffer=Buffer.OUTPUT, dst_offset=0, count=2,
        deps=[[-1], [0]],
    )  # fmt: skip
    s = b.build()
    assert ids.tolist() == [0, 1]
    assert [op.kind for op in s.ops] == [OpKind.COPY, OpKind.REDUCE]
    assert s.op(1).rank == 0  # a reduction is issued where it is computed
    with pytest.raises(ScheduleError, match="copy or reduce"):
        b.add_batch(OpKind.SWITCH_REDUCE, src_rank=[0], src_buffer=0, src_offset=0,
                    dst_rank=[1], dst_buffer=1, dst_offset=0, count=1)  # fmt: skip
