"""Shared test configuration: hypothesis profiles sized for a 2-core CI machine."""

from __future__ import annotations

import os

import pytest
from hypothesis import HealthCheck, settings

settings.register_profile(
    "ci",
    deadline=None,
    max_examples=25,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
settings.register_profile("dev", deadline=None, max_examples=10)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))


@pytest.fixture(autouse=True)
def _no_nccl_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """``scaleup bench`` honours NCCL_ALGO and friends: a developer's shell must not change the
    tables the tests (and the golden files) expect. Tests that want them set them."""
    from scaleup.tune.nccl_env import NCCL_ENV_VARS

    for name in NCCL_ENV_VARS:
        monkeypatch.delenv(name, raising=False)
