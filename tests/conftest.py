"""Shared test configuration: hypothesis profiles sized for a 2-core CI machine."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator

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


@pytest.fixture(scope="session", autouse=True)
def _private_segment_directory() -> Iterator[None]:
    """Every test process (each pytest-xdist worker) keeps its runtime segments in a directory
    of its own (``SCALEUP_SHM_DIR``, on /dev/shm where there is one), which the runs it launches
    inherit. Every launch reclaims dead runs (``reclaim_dead_runs``), so with one shared
    directory a worker's launch could unlink the segments another worker's test had just left
    on purpose (a SIGKILLed launcher's), or count as leaked what another worker made."""
    base = "/dev/shm" if os.path.isdir("/dev/shm") else None
    path = tempfile.mkdtemp(prefix="scaleup_tests_", dir=base)
    previous = os.environ.get("SCALEUP_SHM_DIR")
    os.environ["SCALEUP_SHM_DIR"] = path
    try:
        yield
    finally:
        if previous is None:
            os.environ.pop("SCALEUP_SHM_DIR", None)
        else:
            os.environ["SCALEUP_SHM_DIR"] = previous
        shutil.rmtree(path, ignore_errors=True)
