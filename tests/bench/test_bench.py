"""bench_rows: nccl-tests' sizes, counts, bus factors and columns."""

from __future__ import annotations

import pytest

from scaleup.bench import bench_rows, nccl_size_and_count, sizes
from scaleup.collectives.spec import COLLECTIVES, busbw_factor
from scaleup.errors import UsageError
from scaleup.tune import BenchRequest


def test_sizes_follow_nccl_tests():
    assert sizes(8, 64, 2) == [8, 16, 32, 64]
    assert sizes(8, 100, 4) == [8, 32]
    assert len(sizes(8, 8 * 1024**3, 2)) == 31
    for bad in [(16, 8, 2), (8, 16, 1), (8, 16, 0.5)]:
        with pytest.raises(UsageError):
            sizes(*bad)


def test_blocked_counts_truncate_to_multiple_of_ranks():
    assert nccl_size_and_count("all_gather", 100, 4, 8) == (96, 3, 24)
    assert nccl_size_and_count("reduce_scatter", 8, 4, 8) == (0, 0, 0)
    assert nccl_size_and_count("broadcast", 10, 4, 8) == (8, 2, 2)


@pytest.mark.parametrize("collective", COLLECTIVES)
def test_rows_have_nccl_tests_factors(collective):
    request = BenchRequest(op=collective, sizes_bytes=tuple(sizes(1024, 16 * 1024**2, 16)))
    rows = bench_rows("dgx-h100", request)
    assert [r.bytes for r in rows] == [1024, 16384, 262144, 4194304]
    for r in rows:
        assert r.time_us > 0
        assert r.algbw_gb_per_s == pytest.approx(r.bytes / (r.time_us * 1e-6) / 1e9)
        assert r.busbw_gb_per_s == pytest.approx(r.algbw_gb_per_s * busbw_factor(collective, 8))
        assert r.linkbw_gb_per_s is not None
        assert r.linkbw_gb_per_s >= 0
        assert r.nranks == 8
        assert r.runtime == "sim"
        assert r.root == (0 if collective in ("broadcast", "reduce") else -1)
        assert r.redop == (
            "sum" if collective in ("all_reduce", "reduce_scatter", "reduce") else "none"
        )
    if collective == "all_reduce":
        assert rows[0].busbw_gb_per_s / rows[0].algbw_gb_per_s == pytest.approx(1.75)
    if collective == "all_gather":
        assert rows[0].count == 1024 // 4 // 8  # nccl-tests prints the per-rank count


def test_time_grows_with_size_and_ranks_flag():
    rows = bench_rows("dgx-h100", BenchRequest(sizes_bytes=tuple(sizes(8, 1 << 30, 8)), ranks=4))
    assert all(r.nranks == 4 for r in rows)
    times = [r.time_us for r in rows]
    assert times == sorted(times)


def test_no_p2p_is_slower_on_pcie8_inside_a_socket():
    """Inside one CPU socket (g0..g3) peer-to-peer crosses only PCIe switches; staging through host
    memory crosses PCIe twice and host memory, so it is slower. Across the two sockets both are
    bounded by the same socket link (and NCCL itself stages cross-socket traffic by default)."""
    from scaleup.topology import resolve_topology

    t = resolve_topology("pcie-8")
    size = 64 * 1024**2
    request = BenchRequest(sizes_bytes=(size,), ranks=4)
    p2p = bench_rows(t, request)[0]
    staged = bench_rows(t.with_peer_access(False), request)[0]
    assert staged.time_us > 1.5 * p2p.time_us


def test_bad_arguments():
    with pytest.raises(UsageError, match="ranks must be in 1..8"):
        bench_rows("dgx-h100", BenchRequest(sizes_bytes=(64,), ranks=9))
    with pytest.raises(UsageError, match="root must be in 0..7"):
        bench_rows("dgx-h100", BenchRequest(op="broadcast", root=8, sizes_bytes=(64,)))
