"""Every preset's ``scaleup bench`` table is what it was when stored (``tests/golden/bench/``).

Rows are compared field by field, floats to a relative 1e-9: a refactoring must not move a figure,
and the default path (flow classes) must reproduce the stored per-flow reference up to the
rounding of sums taken in another order. A deliberate model change regenerates the files
(``tests/bench/golden_cases.py``) and says why.
The quick presets run by default; the rest of the presets is ``-m slow``.
"""

from __future__ import annotations

import json
import math

import pytest
from golden_cases import (
    GOLDEN_DIR,
    PRESETS,
    QUICK,
    TEXT_CASES,
    VARIANT_CASES,
    case_key,
    preset_cases,
    preset_file,
)
from typer.testing import CliRunner

from scaleup.cli import app

runner = CliRunner()


def _bench(args: list[str] | tuple[str, ...]) -> str:
    result = runner.invoke(app, ["bench", *args])
    assert result.exit_code == 0, result.output
    return result.output


def _same_rows(actual: list[dict], stored: list[dict], case: str) -> None:
    assert len(actual) == len(stored), case
    for got, want in zip(actual, stored, strict=True):
        assert got.keys() == want.keys(), case
        for key, value in want.items():
            if isinstance(value, float):
                assert math.isclose(got[key], value, rel_tol=1e-9, abs_tol=1e-12), (case, key)
            else:
                assert got[key] == value, (case, key)


def _check_preset(preset: str) -> None:
    stored = json.loads(preset_file(preset).read_text())
    cases = preset_cases(preset)
    assert sorted(stored) == sorted(case_key(a) for a in cases)
    for args in cases:
        _same_rows(json.loads(_bench(args)), stored[case_key(args)], case_key(args))


@pytest.mark.parametrize("preset", QUICK)
def test_quick_preset_tables_unchanged(preset):
    _check_preset(preset)


@pytest.mark.slow
@pytest.mark.parametrize("preset", [p for p in PRESETS if p not in QUICK])
def test_every_preset_table_unchanged(preset):
    _check_preset(preset)


@pytest.mark.parametrize("args", VARIANT_CASES, ids=case_key)
def test_flag_variants_unchanged(args):
    stored = json.loads((GOLDEN_DIR / "variants.json").read_text())
    _same_rows(json.loads(_bench(args)), stored[case_key(args)], case_key(args))


@pytest.mark.parametrize("name", sorted(TEXT_CASES))
def test_text_tables_unchanged(name):
    assert _bench(TEXT_CASES[name]) == (GOLDEN_DIR / name).read_text()
