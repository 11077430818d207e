"""Every example in the library's docstrings runs and prints what it says.

A docstring example is documentation a reader trusts; one that no longer holds (a stale op count)
is a silent wrong answer in the docs. Modules are imported by name, so this needs no pytest flag.
"""

from __future__ import annotations

import doctest
import importlib
import pkgutil

import pytest

import scaleup

#: Modules whose examples run whole simulations (seconds each on 2 cores).
_SLOW = {"scaleup.tune.tuner", "scaleup.bench"}


def _modules() -> list[str]:
    names = [m.name for m in pkgutil.walk_packages(scaleup.__path__, "scaleup.")]
    return sorted(["scaleup", *names])


@pytest.mark.parametrize(
    "name", [pytest.param(n, marks=pytest.mark.slow) if n in _SLOW else n for n in _modules()]
)
def test_docstring_examples_hold(name: str) -> None:
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert result.failed == 0, f"{name}: {result.failed} of {result.attempted} examples failed"
