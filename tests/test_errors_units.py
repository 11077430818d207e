"""The error tree's one-line form and the size/bandwidth helpers."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from scaleup import errors
from scaleup.units import GIB, KIB, MIB, format_bytes, parse_size


def test_one_line_names_source_entry_rank_and_op():
    error = errors.TopologyFileError("count must be > 0", source="box.toml", entry="links[2]")
    assert str(error) == "box.toml: links[2]: count must be > 0"
    failed = errors.RankFailed("worker died", rank=3)
    assert "rank 3" in str(failed)
    race = errors.RaceError("unordered writes", op=7)
    assert str(race).endswith("op 7: unordered writes") or "op 7" in str(race)


def test_every_error_is_a_scaleup_error():
    for name in errors.__all__:
        assert issubclass(getattr(errors, name), errors.ScaleupError)
    assert issubclass(errors.UnknownPreset, errors.InputError)
    assert issubclass(errors.RaceError, errors.ScheduleError)
    assert issubclass(errors.RankTimeout, errors.ExecutionError)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("8", 8),
        ("64K", 64 * KIB),
        ("1M", MIB),
        ("8G", 8 * GIB),
        ("8g", 8 * GIB),
        ("2MB", 2 * MIB),
        ("1.5K", 1536),
    ],
)
def test_parse_size_known_answers(text, expected):
    assert parse_size(text) == expected


@pytest.mark.parametrize("text", ["", "abc", "-8", "1.3", "8X", "M"])
def test_parse_size_rejects_bad_input_with_usage_error(text):
    with pytest.raises(errors.UsageError, match="size"):
        parse_size(text)


@given(st.integers(min_value=0, max_value=2**45))
def test_format_then_parse_round_trips(n_bytes):
    assert parse_size(format_bytes(n_bytes)) == n_bytes
