"""Fixtures for the sweep tests: kind registries with the cheap fake kinds."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import sweep_fake_kinds

from scaleup.sweep import KindFunction, register_kind, unregister_kind
from scaleup.sweep.kinds import BUILTIN_KINDS

FAKES = sweep_fake_kinds.FAKES


@pytest.fixture
def fake_kinds() -> dict[str, KindFunction]:
    """A kind mapping for ``run_sweep(kinds=...)``: the built-ins replaced by the fakes."""
    return {**BUILTIN_KINDS, **FAKES}


@pytest.fixture
def registered_fakes() -> Iterator[dict[str, KindFunction]]:
    """The fakes registered in the process-wide registry (as a user's code would), then removed."""
    for name, function in FAKES.items():
        register_kind(name, function, replace=True)
    yield FAKES
    for name in FAKES:
        unregister_kind(name)
