"""Fuzz the size parser (``64K``, ``1.5M``): a byte count within the limit, or one InputError.

Through the library (:func:`scaleup.units.parse_size`, many cases a second) and through a flag
that takes a size (``schedule show --count``).
"""

from __future__ import annotations

import pytest
from fuzz_support import EXAMPLES, fuzz, run_cli
from hypothesis import strategies as st
from strategies_fuzz import nasty_ints, size_text

from scaleup.errors import InputError
from scaleup.limits import MAX_SIZE_BYTES
from scaleup.units import format_bytes, parse_size


def _check_parse(text: str | int) -> None:
    try:
        n_bytes = parse_size(text, source="-b")
    except InputError as error:
        refused = error
    else:
        assert 0 <= n_bytes <= MAX_SIZE_BYTES
        assert parse_size(format_bytes(n_bytes)) == n_bytes
        return
    assert refused.source == "-b"
    assert "\n" not in refused.one_line()


@pytest.mark.parametrize("examples", EXAMPLES)
def test_fuzz_parse_size(examples: int) -> None:
    fuzz(st.one_of(size_text(), nasty_ints()), _check_parse, examples * 5)


def _check_count_flag(text: str) -> None:
    args = ["schedule", "show", "ring", "all_reduce", "-n", "2", "--limit", "1", "-c", text]
    result = run_cli(args)
    if result.exit_code == 2:
        assert "--count" in result.output or "Invalid value" in result.output


@pytest.mark.parametrize("examples", EXAMPLES)
def test_fuzz_size_flag(examples: int) -> None:
    fuzz(size_text(), _check_count_flag, examples)
