"""BenchRequest: one request, validated once, in library words (errors name the field)."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given
from hypothesis import strategies as st

from scaleup.bench import bench_rows
from scaleup.collectives.spec import COLLECTIVES, PROTOCOL_NAMES, REDOPS
from scaleup.errors import UsageError
from scaleup.topology import resolve_topology
from scaleup.tune import BenchRequest, nccl_sizes
from scaleup.tune.request import BENCH_REDOPS, QUICKSTART_SIZES

DGX = resolve_topology("dgx-h100")


def test_defaults_are_the_quickstart_table():
    request = BenchRequest()
    assert (request.op, request.sizes_bytes) == ("all_reduce", QUICKSTART_SIZES)
    assert (len(QUICKSTART_SIZES), QUICKSTART_SIZES[-1]) == (31, 8 * 1024**3)
    assert request.nranks_on(DGX) == 8


def test_frozen():
    with pytest.raises(dataclasses.FrozenInstanceError):
        BenchRequest().op = "all_gather"  # type: ignore[misc]


@pytest.mark.parametrize(
    ("fields", "source"),
    [
        ({"op": "all_sum"}, "op"),
        ({"sizes_bytes": ()}, "sizes_bytes"),
        ({"sizes_bytes": (8, -1)}, "sizes_bytes"),
        ({"sizes_bytes": (8.5,)}, "sizes_bytes"),
        ({"dtype": "float8"}, "dtype"),
        ({"redop": "mulsum"}, "redop"),
        ({"root": -1}, "root"),
        ({"ranks": 0}, "ranks"),
        ({"ranks": True}, "ranks"),
        ({"op": "broadcast", "ranks": 4, "root": 4}, "root"),
        ({"algorithm": "no-such"}, "algorithm"),
        ({"op": "all_to_all", "algorithm": "tree"}, "algorithm"),
        ({"protocol": "fast"}, "protocol"),
        ({"channels": 0}, "channels"),
        ({"family": "mine"}, "family"),
    ],
)
def test_every_field_is_checked_and_named(fields, source):
    with pytest.raises(UsageError) as caught:
        BenchRequest(**fields)
    assert caught.value.source == source


def test_fabric_checks_name_the_field():
    with pytest.raises(UsageError, match="ranks must be in 1..8 on dgx-h100") as caught:
        BenchRequest(ranks=9).nranks_on(DGX)
    assert caught.value.source == "ranks"
    with pytest.raises(UsageError, match="root must be in 0..7") as caught:
        BenchRequest(op="reduce", root=8).nranks_on(DGX)
    assert caught.value.source == "root"
    assert BenchRequest(op="all_reduce", root=8).nranks_on(DGX) == 8  # no root: ignored


def test_what_the_spec_and_the_table_get():
    reduce = BenchRequest(op="reduce", redop="max", root=3)
    assert (reduce.spec_redop, reduce.spec_root) == ("max", 3)
    assert (reduce.printed_redop, reduce.printed_root) == ("max", 3)
    gather = BenchRequest(op="all_gather", redop="max", root=3)
    assert (gather.spec_redop, gather.spec_root) == ("sum", 0)
    assert (gather.printed_redop, gather.printed_root) == ("none", -1)


def test_printed_sizes_follow_nccl_tests():
    request = BenchRequest(op="all_gather", sizes_bytes=(100, 1024))
    assert request.printed(8) == [(96, 3, 24), (1024, 32, 256)]


def test_nccl_sizes_errors_name_fields():
    with pytest.raises(UsageError) as caught:
        nccl_sizes(16, 8)
    assert caught.value.source == "min_bytes/max_bytes"
    with pytest.raises(UsageError) as caught:
        nccl_sizes(8, 16, 1)
    assert caught.value.source == "factor"


@given(
    op=st.sampled_from(COLLECTIVES),
    sizes=st.lists(st.integers(0, 1 << 40), min_size=1, max_size=5),
    redop=st.sampled_from(BENCH_REDOPS),
    ranks=st.none() | st.integers(1, 16),
    protocol=st.none() | st.sampled_from(PROTOCOL_NAMES),
    channels=st.none() | st.integers(1, 64),
    family=st.sampled_from(["nccl", "all"]),
)
def test_any_valid_combination_constructs(op, sizes, redop, ranks, protocol, channels, family):
    request = BenchRequest(
        op=op,
        sizes_bytes=tuple(sizes),
        redop=redop,
        ranks=ranks,
        protocol=protocol,
        channels=channels,
        family=family,
    )
    assert request.sizes_bytes == tuple(sizes)
    assert request.spec_redop in REDOPS
    assert request.printed_root in (-1, 0)


def test_avg_is_a_timed_sum_that_nvls_does_not_take():
    """nccl-tests' ``-o avg``: NCCL runs a pre-multiplied sum, which its NVLS kernels refuse."""
    avg = BenchRequest(op="all_reduce", redop="avg")
    assert (avg.spec_redop, avg.nccl_redop, avg.printed_redop) == ("sum", "avg", "avg")
    gather = BenchRequest(op="all_gather", redop="avg")
    assert (gather.spec_redop, gather.nccl_redop, gather.printed_redop) == ("sum", "sum", "none")
    sizes = (64 << 20,)
    tuned = bench_rows(DGX, BenchRequest(sizes_bytes=sizes))[0]
    averaged = bench_rows(DGX, BenchRequest(sizes_bytes=sizes, redop="avg"))[0]
    assert tuned.algo == "nvls"
    assert averaged.algo != "nvls"
    assert averaged.redop == "avg"
    ring = {
        redop: bench_rows(DGX, BenchRequest(sizes_bytes=sizes, redop=redop, algorithm="ring"))[0]
        for redop in ("sum", "avg")
    }
    assert ring["avg"].time_us == ring["sum"].time_us
