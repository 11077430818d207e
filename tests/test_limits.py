"""scaleup.limits and the size parser: documented limits, refused in one line before allocating."""

from __future__ import annotations

import resource
from pathlib import Path

import pytest

from scaleup import limits
from scaleup.bench import sizes
from scaleup.errors import InputError, LimitError, UsageError
from scaleup.units import parse_size


def test_check_at_most_names_the_field_the_value_and_the_constant() -> None:
    limits.check_at_most(64, limits.MAX_CHANNELS, source="channels", name="MAX_CHANNELS")
    with pytest.raises(LimitError) as info:
        limits.check_at_most(65, limits.MAX_CHANNELS, source="channels", name="MAX_CHANNELS")
    assert info.value.source == "channels"
    assert info.value.one_line() == (
        "channels: 65 is more than the limit of 64 (scaleup.limits.MAX_CHANNELS)"
    )


def test_check_at_most_keeps_a_huge_number_short() -> None:
    with pytest.raises(LimitError, match=r"~10\^400 is more than") as info:
        limits.check_at_most(10**400, limits.MAX_RANKS, source="ranks", name="MAX_RANKS")
    assert len(info.value.one_line()) < 100


def test_available_memory_is_positive_and_honours_the_address_space_limit() -> None:
    assert limits.available_memory_bytes() > 0
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    status = Path("/proc/self/status").read_text()
    vm_size = next(int(x.split()[1]) * 1024 for x in status.splitlines() if x.startswith("VmSize"))
    resource.setrlimit(resource.RLIMIT_AS, (vm_size + (256 << 20), hard))
    try:
        assert limits.available_memory_bytes() <= 256 << 20
    finally:
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))


def test_check_memory_refuses_more_than_is_free() -> None:
    limits.check_memory(1 << 20, what="a small job", source="count")
    with pytest.raises(LimitError, match="a huge job would need about") as info:
        limits.check_memory(2**60, what="a huge job", source="count")
    assert info.value.source == "count"


@pytest.mark.parametrize(
    ("text", "n_bytes"),
    [("64M", 64 << 20), ("1.5K", 1536), ("1024T", limits.MAX_SIZE_BYTES), (" 8 GiB ", 8 << 30)],
)
def test_parse_size_is_exact_up_to_the_limit(text: str, n_bytes: int) -> None:
    assert parse_size(text) == n_bytes


@pytest.mark.parametrize("value", ["1025T", "9" * 400, "9" * 5000, limits.MAX_SIZE_BYTES + 1])
def test_parse_size_refuses_sizes_past_the_limit(value: str | int) -> None:
    with pytest.raises(LimitError, match="MAX_SIZE_BYTES") as info:
        parse_size(value, source="-b")
    assert info.value.source == "-b"


@pytest.mark.parametrize("text", ["0.1", "1e3", "-5", "x" * 1000])
def test_parse_size_refuses_what_is_not_a_size(text: str) -> None:
    with pytest.raises(InputError) as info:
        parse_size(text)
    assert len(info.value.one_line()) < 120


@pytest.mark.parametrize("factor", [float("inf"), float("nan"), 1.0, -2.0])
def test_bench_sizes_refuse_a_factor_that_is_not_finite_and_above_one(factor: float) -> None:
    with pytest.raises(UsageError, match="factor must be"):
        sizes(8, 64, factor)


def test_bench_sizes_survive_a_factor_that_overflows() -> None:
    assert sizes(1, limits.MAX_SIZE_BYTES, 1e308) == [1]
    assert sizes(5, 8, 1.7) == [5, 8]  # int(8.5) <= 8: still nccl-tests' loop
