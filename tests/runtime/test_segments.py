"""/dev/shm segments: untrusted names, reclaiming dead runs, and size limits checked up front."""

from __future__ import annotations

import fcntl
import math
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from scaleup import runtime as rt
from scaleup.cli import app
from scaleup.errors import RankFailed, TransportError
from scaleup.runtime import shm as shm_mod
from scaleup.runtime.launch import MAX_WORLD_SIZE
from scaleup.runtime.shm import PREFIX, Segment, list_segments, reclaim_dead_runs, shm_dir

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "runtime_allreduce.py"
NOBODY = 65534
as_root = pytest.mark.skipif(os.geteuid() != 0, reason="giving a file to another user needs root")


def dead_pid() -> int:
    proc = subprocess.Popen(["true"])
    proc.wait()
    return proc.pid


def make(name: str, *, uid: int | None = None, mode: int = 0o600, size: int = 4096) -> Path:
    path = shm_dir() / name
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, mode)
    os.ftruncate(fd, size)
    os.fchmod(fd, mode)
    if uid is not None:
        os.fchown(fd, uid, uid)
    os.close(fd)
    return path


@pytest.fixture
def run_prefix(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """The prefix the next launch will use (known in advance, so a test can squat on it)."""
    prefix = shm_mod.new_run_prefix()
    monkeypatch.setattr(shm_mod, "new_run_prefix", lambda: prefix)
    yield prefix
    for name in list_segments(prefix):
        os.unlink(shm_dir() / name)


@pytest.fixture
def dead_run() -> Iterator[str]:
    """Segments left by a SIGKILLed launcher: its pid is gone, nobody maps them."""
    prefix = shm_mod.new_run_prefix(dead_pid())
    for suffix in ("ctrl", "r0-a0", "r1-a0"):
        make(prefix + suffix)
    yield prefix
    for name in list_segments(prefix):
        os.unlink(shm_dir() / name)


# ---- reclaiming dead runs ------------------------------------------------------------------
def test_the_next_launch_reclaims_a_dead_launchers_segments(dead_run: str) -> None:
    assert rt.launch(lambda: 7, 1) == [7]
    assert list_segments(dead_run) == []


def test_cleanup_command_reclaims_and_says_how_many(dead_run: str) -> None:
    result = CliRunner().invoke(app, ["run", "--cleanup"])
    assert result.exit_code == 0, result.output
    assert list_segments(dead_run) == []
    assert "removed" in result.output


def test_a_live_run_is_never_reclaimed() -> None:
    sleeper = subprocess.Popen(["sleep", "60"])
    prefix = shm_mod.new_run_prefix(sleeper.pid)
    try:
        make(prefix + "ctrl")
        assert prefix + "ctrl" not in reclaim_dead_runs()
        assert list_segments(prefix) == [prefix + "ctrl"]
    finally:
        sleeper.kill()
        sleeper.wait()
    assert prefix + "ctrl" in reclaim_dead_runs()


def test_a_run_still_mapped_is_not_reclaimed(dead_run: str) -> None:
    # its launcher pid is dead here, but a process (in another pid namespace, say) holds it
    fd = os.open(shm_dir() / (dead_run + "ctrl"), os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_SH)
        reclaim_dead_runs()
        assert len(list_segments(dead_run)) == 3
    finally:
        os.close(fd)
    reclaim_dead_runs()
    assert list_segments(dead_run) == []


@as_root
def test_a_foreign_file_does_not_stop_cleanup_of_the_rest(dead_run: str) -> None:
    foreign = make(dead_run + "r2-a0", uid=NOBODY)
    removed = reclaim_dead_runs()
    assert foreign.name not in removed
    assert list_segments(dead_run) == [foreign.name]  # left to its owner, the rest is gone


# ---- names are not trusted -------------------------------------------------------------------
@pytest.mark.parametrize(
    ("kwargs", "why"),
    [
        ({"mode": 0o644}, "lets other users in"),
        ({"size": 8}, "expected 4096"),
        pytest.param({"uid": NOBODY}, "owned by uid 65534", marks=as_root),
    ],
)
def test_attach_checks_the_file(kwargs: dict[str, int], why: str) -> None:
    name = shm_mod.new_run_prefix() + "r0-a0"
    make(name, **kwargs)
    try:
        with pytest.raises(TransportError, match=why):
            Segment(name, 4096, create=False)
    finally:
        os.unlink(shm_dir() / name)


def test_attach_does_not_follow_a_symlink(tmp_path: Path) -> None:
    target = tmp_path / "victim"
    target.write_bytes(b"\0" * 4096)
    name = shm_mod.new_run_prefix() + "r0-a0"
    (shm_dir() / name).symlink_to(target)
    try:
        with pytest.raises(TransportError, match="symbolic link"):
            Segment(name, 4096, create=False)
        with pytest.raises(TransportError, match="symbolic link"):
            Segment(name, 4096, create=True)
    finally:
        os.unlink(shm_dir() / name)
    assert target.read_bytes() == b"\0" * 4096


def test_a_squatted_segment_fails_the_run_and_the_rest_is_cleaned(
    run_prefix: str, tmp_path: Path
) -> None:
    (shm_dir() / (run_prefix + "r1-a0")).symlink_to(tmp_path / "victim")
    with pytest.raises(RankFailed, match="cannot create segment .*r1-a0: a symbolic link") as info:
        rt.launch(lambda: rt.init().alloc(10), 2, timeout_s=10)
    assert info.value.rank == 1
    assert not (tmp_path / "victim").exists()
    assert list_segments(run_prefix) == []


@as_root
def test_a_squatted_control_block_is_one_cli_line(run_prefix: str) -> None:
    make(run_prefix + "ctrl", uid=NOBODY)
    result = CliRunner().invoke(app, ["run", "-n", "2", str(EXAMPLE)])
    assert result.exit_code == 2
    assert result.output.count("\n") == 1
    assert "a file of uid 65534 is there" in result.output
    assert list_segments(run_prefix) == [run_prefix + "ctrl"]


# ---- limits, checked before anything is created ------------------------------------------------
def test_world_size_over_the_limit_is_one_cli_line() -> None:
    # Only this process's runs: the other xdist worker launches runs of its own meanwhile.
    mine = f"{PREFIX}{os.getpid()}-"
    before = list_segments(mine)
    result = CliRunner().invoke(app, ["run", "-n", "100000000000", str(EXAMPLE)])
    assert result.exit_code == 2
    assert result.output.startswith(
        f"error: -n/--nproc: world_size must be an integer in 1..{MAX_WORLD_SIZE}"
    )
    assert set(list_segments(mine)) <= set(before)


def test_pipe_world_beyond_the_open_file_limit_is_a_usage_error() -> None:
    import resource

    soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    world = math.isqrt(soft) + 2
    if soft == resource.RLIM_INFINITY or world > MAX_WORLD_SIZE:
        pytest.skip("the open-file limit allows any world size")
    result = CliRunner().invoke(app, ["run", "-n", str(world), "-t", "pipe", str(EXAMPLE)])
    assert result.exit_code == 2
    assert "ulimit -n" in result.output


def _alloc(count: int) -> None:
    rt.init().alloc(count, "float32")


@pytest.mark.parametrize("transport", ["shm", "pipe", "local"])
def test_alloc_over_the_heap_limit_is_a_usage_error(transport: str) -> None:
    with pytest.raises(
        RankFailed, match="UsageError: alloc: 3.64 TiB would grow .* over its limit of 64 GiB"
    ):
        rt.launch(_alloc, 2, 10**12, transport=transport, timeout_s=10)


def test_the_heap_limit_is_configurable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SCALEUP_SYMMETRIC_SIZE", "1M")
    with pytest.raises(RankFailed, match="over its limit of 1 MiB"):
        rt.launch(_alloc, 1, 1 << 20, transport="local")
    assert rt.launch(_alloc, 1, 1 << 10, transport="local") == [None]


def test_alloc_beyond_free_shm_space_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    st = os.statvfs(shm_dir())
    per_rank_bytes = st.f_bavail * st.f_frsize // 2 + (64 << 20)  # two ranks: over what is free
    monkeypatch.setenv("SCALEUP_SYMMETRIC_SIZE", str(2 * per_rank_bytes))
    with pytest.raises(
        RankFailed, match="TransportError: alloc of .* GiB on each of 2 ranks needs .* GiB in"
    ):
        rt.launch(_alloc, 2, per_rank_bytes // 4, transport="shm", timeout_s=10)
