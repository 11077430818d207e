"""What every fuzz test of an input path shares: a bounded in-process CLI run and its verdict.

Each fuzz module draws inputs for one path (flags, sizes, topology TOML, preset strings,
schedule JSON, model TOML) and hands them to :func:`run_cli`, which runs the command in-process
(typer's CliRunner) under a time and a memory bound and asserts the contract of issue 10:

- no traceback: the command ends by ``SystemExit`` (typer's exit), never by another exception;
- a refused input is one line (``error: ...``);
- exit code 0, 1 (a schedule that fails verification) or 2 (bad input);
- at most :data:`TIME_LIMIT_S` seconds (``SIGALRM`` raises inside the command) and at most
  :data:`MEMORY_LIMIT_BYTES` of new address space (``RLIMIT_AS`` lowered to what the process
  holds plus the bound, so a larger allocation is a ``MemoryError``, not an OOM kill).

:data:`EXAMPLES` parametrizes a test with a few hundred cases in every run, and the 10,000-case
campaign when ``SCALEUP_FUZZ_CAMPAIGN=1`` is set (hours on 2 cores: too long for the suite CI
runs, so it is opt-in, not merely ``slow``); :func:`fuzz` runs a strategy through a check that
many times.
"""

from __future__ import annotations

import contextlib
import os
import resource
import signal
import tempfile
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner, Result

from scaleup.cli import app

__all__ = [
    "EXAMPLES",
    "MEMORY_LIMIT_BYTES",
    "TIME_LIMIT_S",
    "bounded",
    "fuzz",
    "run_cli",
    "write_input",
]

#: Per-case bounds of the issue's "Done when": no case over 10 s or 1 GB.
TIME_LIMIT_S = 10
MEMORY_LIMIT_BYTES = 1 << 30
#: Cases per input path: a few hundred by default (the six paths take well under a minute on a
#: 2-core machine), 10,000 in the opt-in campaign (``SCALEUP_FUZZ_CAMPAIGN=1``).
DEFAULT_EXAMPLES = 200
CAMPAIGN_EXAMPLES = 10_000
_CAMPAIGN = os.environ.get("SCALEUP_FUZZ_CAMPAIGN", "") not in ("", "0")
EXAMPLES = [
    pytest.param(DEFAULT_EXAMPLES, id="default"),
    pytest.param(
        CAMPAIGN_EXAMPLES,
        id="campaign",
        marks=[
            pytest.mark.slow,
            pytest.mark.skipif(not _CAMPAIGN, reason="set SCALEUP_FUZZ_CAMPAIGN=1 to run"),
        ],
    ),
]

_RUNNER = CliRunner()
_INPUTS = tempfile.TemporaryDirectory(prefix="scaleup-fuzz-")


class CaseTimeout(Exception):
    """A case ran past :data:`TIME_LIMIT_S` (raised inside it by ``SIGALRM``)."""


def _vm_size_bytes() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmSize:"):
            return int(line.split()[1]) * 1024
    return 0


@contextlib.contextmanager
def bounded(seconds: int = TIME_LIMIT_S, memory_bytes: int = MEMORY_LIMIT_BYTES) -> Iterator[None]:
    """Run the body with at most ``seconds`` of wall time and ``memory_bytes`` more address
    space than the process holds now (restored afterwards)."""

    def _alarm(signum: int, frame: Any) -> None:
        raise CaseTimeout(f"ran past {seconds} s")

    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    cap = _vm_size_bytes() + memory_bytes
    if hard != resource.RLIM_INFINITY:
        cap = min(cap, hard)
    previous = signal.signal(signal.SIGALRM, _alarm)
    resource.setrlimit(resource.RLIMIT_AS, (cap, hard))
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))


def run_cli(args: Sequence[str]) -> Result:
    """Run ``scaleup ARGS`` in-process under :func:`bounded` and assert the contract above."""
    with bounded():
        result = _RUNNER.invoke(app, list(args))
    crash = result.exception if not isinstance(result.exception, SystemExit) else None
    shown = " ".join(a if len(a) < 80 else a[:80] + "..." for a in args)
    assert crash is None, f"scaleup {shown} raised {crash!r}\n{result.output[-2000:]}"
    assert "Traceback" not in result.output, f"scaleup {shown} printed a traceback"
    assert result.exit_code in (0, 1, 2), f"scaleup {shown} exited {result.exit_code}"
    if result.exit_code == 2 and result.output.startswith("error: "):
        assert result.output.count("\n") == 1, f"scaleup {shown}: more than one line"
    return result


def write_input(name: str, text: str | bytes) -> Path:
    """Write a fuzzed input file (overwritten by the next case of the same name)."""
    path = Path(_INPUTS.name) / name
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text, encoding="utf-8", errors="surrogatepass")
    return path


def fuzz(strategy: st.SearchStrategy[Any], check: Callable[[Any], None], examples: int) -> None:
    """Run ``check`` on ``examples`` cases drawn from ``strategy`` (no deadline: the time bound
    is :func:`bounded`'s, per case)."""

    @settings(
        max_examples=examples,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )
    @given(strategy)
    def run(case: Any) -> None:
        check(case)

    run()
