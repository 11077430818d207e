"""torchrun's environment without ``scaleup run``: rank 0 hosts a rendezvous (issue 14, item 3)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from scaleup import runtime as rt
from scaleup.errors import Unsupported, UsageError
from scaleup.runtime.rendezvous import TIMEOUT_ENV, torchrun_env

WORKER = Path(__file__).with_name("torchrun_worker.py")
SRC = Path(__file__).parents[2] / "src"
JOIN_S = 120  # join timeout of a whole run: never a hang


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture
def shm_dir() -> Iterator[Path]:
    """A private segment directory (on /dev/shm when there is one): leaks show up exactly."""
    base = "/dev/shm" if os.path.isdir("/dev/shm") else None
    with tempfile.TemporaryDirectory(prefix="scaleup-rdzv-test-", dir=base) as name:
        yield Path(name)


def _start(
    ranks: list[int], world: int, shm_dir: Path, *args: str, **extra: str
) -> list[subprocess.Popen[str]]:
    port = str(_free_port())
    procs = []
    for rank in ranks:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("SCALEUP_", "PMI_"))}
        env.update(
            RANK=str(rank),
            WORLD_SIZE=str(world),
            LOCAL_RANK=str(rank),
            MASTER_ADDR="127.0.0.1",
            MASTER_PORT=port,
            SCALEUP_SHM_DIR=str(shm_dir),
            PYTHONPATH=os.pathsep.join([str(SRC), env.get("PYTHONPATH", "")]),
            **extra,
        )
        procs.append(
            subprocess.Popen(
                [sys.executable, str(WORKER), *args],
                env=env,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
        )
    return procs


def _finish(procs: list[subprocess.Popen[str]]) -> list[tuple[int, str, str]]:
    done = []
    for proc in procs:
        try:
            out, err = proc.communicate(timeout=JOIN_S)
        except subprocess.TimeoutExpired:
            for other in procs:
                other.kill()
            raise
        done.append((proc.returncode, out, err))
    return done


@pytest.mark.parametrize(("world", "order"), [(2, 1), (3, -1)])
def test_torchrun_style_ranks_form_one_group(world: int, order: int, shm_dir: Path) -> None:
    ranks = list(range(world))[::order]  # -1: rank 0 last, the others retry until it listens
    results = dict(zip(ranks, _finish(_start(ranks, world, shm_dir)), strict=True))
    total = world * (world + 1) // 2
    for rank, (code, out, err) in sorted(results.items()):
        assert code == 0, err
        assert out.strip() == f"rank {rank} of {world}: {total}"
    assert list(shm_dir.iterdir()) == []  # rank 0 unlinked the run


@pytest.mark.parametrize(("how", "code", "what"), [("die", 3, "died"), ("raise", 1, "raised")])
def test_a_failed_rank_stops_the_others_and_leaks_nothing(
    how: str, code: int, what: str, shm_dir: Path
) -> None:
    (code0, _, err0), (code1, _, err1) = _finish(_start([0, 1], 2, shm_dir, how))
    assert code1 == code
    assert code0 == 1
    assert err0.strip().splitlines()[-1] == f"RankFailed: rank 1 {what}; rank 0 stops"
    if how == "raise":
        assert err1.strip().splitlines()[-1] == "ValueError: rank 1 gives up"
    assert list(shm_dir.iterdir()) == []


def test_a_dead_rank_0_stops_the_others_and_the_last_out_reclaims(shm_dir: Path) -> None:
    (code0, _, _), (code1, _, err1) = _finish(_start([0, 1], 2, shm_dir, "die0"))
    assert code0 == -9
    assert code1 == 1
    assert err1.strip().splitlines()[-1] == "RankFailed: rank 0 died; rank 1 stops"
    assert list(shm_dir.iterdir()) == []


def test_missing_rank_times_out_in_one_line(shm_dir: Path) -> None:
    start = time.monotonic()
    [(code, out, err)] = _finish(_start([0], 2, shm_dir, **{TIMEOUT_ENV: "1"}))
    assert time.monotonic() - start < JOIN_S
    assert code == 1
    last = err.strip().splitlines()[-1]
    assert last.startswith("scaleup.errors.TransportError: MASTER_ADDR: rendezvous at 127.0.0.1:")
    assert last.endswith(f"timed out: rank 1 of WORLD_SIZE=2 never joined (see {TIMEOUT_ENV})")
    assert out == ""
    assert list(shm_dir.iterdir()) == []


@pytest.fixture
def torchrun(monkeypatch: pytest.MonkeyPatch) -> Iterator[pytest.MonkeyPatch]:
    for name in ("SCALEUP_RANK", "PMI_RANK", "OMPI_COMM_WORLD_RANK"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("RANK", "0")
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("MASTER_PORT", "29511")
    yield monkeypatch
    rt.shutdown()


def test_non_local_master_addr_is_unsupported(torchrun: pytest.MonkeyPatch) -> None:
    torchrun.setenv("MASTER_ADDR", "192.0.2.1")  # TEST-NET-1: never an address of this host
    with pytest.raises(Unsupported, match="not an address of this machine") as info:
        rt.init()
    assert info.value.source == "MASTER_ADDR"
    assert "\n" not in str(info.value)
    assert not rt.is_initialized()


def test_pipe_transport_needs_the_launcher(torchrun: pytest.MonkeyPatch) -> None:
    torchrun.setenv("MASTER_ADDR", "127.0.0.1")
    with pytest.raises(UsageError, match="needs a launcher"):
        rt.init(transport="pipe")


def test_torchrun_env_parsing() -> None:
    assert torchrun_env({}) is None
    assert torchrun_env({"RANK": "0", "WORLD_SIZE": "1"}) is None
    env = {"RANK": "1", "WORLD_SIZE": "2", "MASTER_ADDR": "localhost", "MASTER_PORT": "29500"}
    me = torchrun_env(env)
    assert me is not None
    assert (me.rank, me.world_size, me.master_port) == (1, 2, 29500)
    me = torchrun_env({**env, "TORCHELASTIC_USE_AGENT_STORE": "True"})
    assert me is not None
    assert me.master_port == 29501  # torchrun's agent holds MASTER_PORT
    with pytest.raises(UsageError) as info:
        torchrun_env({**env, "MASTER_PORT": "x"})
    assert info.value.source == "MASTER_PORT"
