"""Fuzzing ``scaleup sweep SPEC``: whatever the spec file holds, no traceback, exit 0, 1 or 2.

Each case writes a spec (mostly well-formed TOML with the spec's own vocabulary, good values and
bad; sometimes spliced text, arbitrary text or bytes) and runs the real command in-process with
``--serial --max-points 2``: load, validate, expand, build topologies, prepare the output, run
two points and write them. ``bench``/``plan`` points are evaluated by cheap fakes (the sweep's
input handling is under test, not the simulator). A few hundred cases by default; 10,000 in the
opt-in campaign (``SCALEUP_FUZZ_CAMPAIGN=1``; too long for the suite CI runs).
"""

from __future__ import annotations

import itertools
import os
import resource
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from typer.testing import CliRunner

from scaleup.cli import app
from strategies import file_bytes, sweep_spec_texts

#: Limits of the issue: per case, and for the whole run's peak memory growth.
CASE_LIMIT_S = 10.0
MEMORY_LIMIT_BYTES = 1 << 30

_FUZZ = settings(
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
_counter = itertools.count()


def _max_rss_bytes() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # Linux: kilobytes


def _check_one(content: bytes, root: Path) -> None:
    case = root / f"case-{next(_counter)}"
    case.mkdir()
    spec = case / "spec.toml"
    spec.write_bytes(content)
    argv = ["sweep", str(spec), "-o", str(case / "out.parquet"), "--serial", "--max-points", "2"]
    start = time.perf_counter()
    result = CliRunner().invoke(app, argv)
    elapsed_s = time.perf_counter() - start
    assert result.exception is None or isinstance(result.exception, SystemExit), (
        f"{type(result.exception).__name__}: {result.exception}"
    )
    assert "Traceback" not in result.output
    assert result.exit_code in (0, 1, 2), result.output
    if result.exit_code == 2:
        assert result.stderr.startswith("error: "), result.stderr
        assert result.stderr.count("\n") == 1, result.stderr
    assert elapsed_s < CASE_LIMIT_S


def _run(content: bytes, tmp_path_factory: pytest.TempPathFactory) -> None:
    root = tmp_path_factory.getbasetemp() / "fuzz"
    root.mkdir(exist_ok=True)
    _check_one(content, root)


@pytest.fixture
def baseline_rss(registered_fakes: object) -> object:
    before = _max_rss_bytes()
    yield
    assert _max_rss_bytes() - before < MEMORY_LIMIT_BYTES


@settings(_FUZZ, max_examples=300)
@given(content=file_bytes(sweep_spec_texts()))
def test_fuzz_sweep_spec(
    content: bytes, tmp_path_factory: pytest.TempPathFactory, baseline_rss: object
) -> None:
    _run(content, tmp_path_factory)


@pytest.mark.slow
@pytest.mark.skipif(
    os.environ.get("SCALEUP_FUZZ_CAMPAIGN", "") in ("", "0"),
    reason="set SCALEUP_FUZZ_CAMPAIGN=1 to run",
)
@settings(_FUZZ, max_examples=10_000)
@given(content=file_bytes(sweep_spec_texts()))
def test_fuzz_sweep_spec_10k(
    content: bytes, tmp_path_factory: pytest.TempPathFactory, baseline_rss: object
) -> None:
    _run(content, tmp_path_factory)
