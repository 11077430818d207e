"""torch.distributed habits: torchrun's environment, init/destroy_process_group, new_group,
send/recv/isend/irecv, list-form all_gather, ReduceOp.AVG, and ``scaleup run``'s torchrun flag,
rank-prefixed output and one summary line."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from scaleup import runtime as rt
from scaleup.cli import app
from scaleup.errors import RankFailed, UsageError
from scaleup.runtime import api, p2p

TRANSPORTS = ["shm", "pipe", "local"]


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    for name in ("SCALEUP_RANK", "RANK", "WORLD_SIZE", "LOCAL_RANK", "PMI_RANK",
                 "OMPI_COMM_WORLD_RANK", "MASTER_ADDR", "MASTER_PORT"):  # fmt: skip
        monkeypatch.delenv(name, raising=False)
    yield monkeypatch
    rt.shutdown()


@pytest.mark.parametrize(
    ("rank", "world", "source"),
    [("1", "2", "MASTER_ADDR"), ("0", "4", "MASTER_ADDR"), ("3", "1", "RANK")],
)
def test_incomplete_torchrun_environment_names_the_variable(clean_env, rank, world, source):
    clean_env.setenv("RANK", rank)
    clean_env.setenv("WORLD_SIZE", world)
    with pytest.raises(UsageError) as info:
        rt.init()
    assert info.value.source == source
    assert not rt.is_initialized()  # never silently a one-rank group


def test_torchrun_world_of_one_is_one_rank(clean_env):
    clean_env.setenv("RANK", "0")
    clean_env.setenv("WORLD_SIZE", "1")
    rt.init()
    assert (rt.rank(), rt.world_size()) == (0, 1)


def test_bad_world_size_names_the_variable(clean_env):
    clean_env.setenv("WORLD_SIZE", "two")
    with pytest.raises(UsageError) as info:
        rt.init()
    assert info.value.source == "WORLD_SIZE"


def _habits() -> tuple[float, list[float], bool]:
    api.init_process_group("gloo")
    me, n = api.get_rank(), api.get_world_size()
    x = np.full(5, float(me))
    rt.all_reduce(x, op=rt.ReduceOp.AVG)
    outs = [np.zeros(3) for _ in range(n)]
    work = rt.all_gather(outs, np.full(3, float(me)), async_op=True)
    assert work is not None
    work.wait()
    # larger than one slot: several chunks, both directions at once
    big = np.arange(100_000, dtype=np.float64) * (me + 1)
    got = np.zeros_like(big)
    src, dst = (me - 1) % n, (me + 1) % n
    sent, received = api.isend(big, dst), api.irecv(got, src)
    sent.wait()
    received.wait()
    ok = bool(np.array_equal(got, np.arange(100_000, dtype=np.float64) * (src + 1)))
    if me == 0:  # blocking, buffered: two messages arrive in order
        api.send(np.array([7], np.int64), 1)
        api.send(np.array([8], np.int64), 1)
    elif me == 1:
        a, b = np.zeros(1, np.int64), np.zeros(1, np.int64)
        assert api.recv(a, 0) == 0
        api.recv(b, 0)
        ok = ok and (int(a[0]), int(b[0])) == (7, 8)
    ok = ok and api.new_group() is rt.group() and api.new_group(range(n)) is rt.group()
    api.destroy_process_group()
    return float(x[0]), [float(o[0]) for o in outs], ok


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_torch_habits_on_every_transport(transport: str) -> None:
    results = rt.launch(_habits, 3, transport=transport, timeout_s=15)
    for avg, gathered, ok in results:
        assert avg == pytest.approx(1.0)  # (0 + 1 + 2) / 3
        assert gathered == [0.0, 1.0, 2.0]
        assert ok


def _reduce_avg() -> list[float]:
    rt.init()
    x = np.full(4, float(rt.rank() + 1), dtype=np.float32)
    rt.reduce(x, dst=1, op="avg")
    out = np.zeros(2, dtype=np.float32)
    rt.reduce_scatter(out, np.full(4, float(rt.rank()), dtype=np.float32), op=rt.ReduceOp.AVG)
    return [float(x[0]), float(out[0])]


def test_avg_reduce_and_reduce_scatter() -> None:
    results = rt.launch(_reduce_avg, 2, transport="local", timeout_s=10)
    assert results[1][0] == pytest.approx(1.5)  # the root averages
    assert results[0][0] == 1.0  # the other rank keeps its array
    assert all(r[1] == pytest.approx(0.5) for r in results)


def _avg_on_ints() -> None:
    rt.init()
    rt.all_reduce(np.ones(2, dtype=np.int32), op="avg")


def test_avg_needs_floats() -> None:
    with pytest.raises(RankFailed, match="avg needs a floating dtype"):
        rt.launch(_avg_on_ints, 2, transport="local", timeout_s=5)


def _misuse(case: str) -> None:
    rt.init()
    if case == "no-mailbox":
        api.send(np.zeros(1), 1 - rt.rank())
    elif case == "tag":
        api.init_process_group()
        api.send(np.zeros(1), 1 - rt.rank(), tag=3)
    elif case == "size":
        api.init_process_group()
        if rt.rank() == 0:
            api.send(np.zeros(4), 1)
        else:
            api.recv(np.zeros(2), 0)
    elif case == "any-source":
        api.init_process_group()
        api.recv(np.zeros(1))


@pytest.mark.parametrize(
    ("case", "message"),
    [
        ("no-mailbox", "init_process_group"),
        ("tag", "tags"),
        ("size", "sent 32 bytes, the buffer holds 16"),
        ("any-source", "needs src"),
    ],
)
def test_p2p_misuse_is_one_clear_error(case: str, message: str) -> None:
    with pytest.raises(RankFailed, match=message):
        rt.launch(_misuse, 2, case, transport="local", timeout_s=5)


def test_mailbox_chunks():
    class _Group:
        world_size = 2
        rank = 0

        def alloc(self, shape, dtype):
            return np.zeros(shape, dtype=dtype)

    box = p2p.Mailbox(_Group(), slot_bytes=72)  # type: ignore[arg-type]
    assert [box.chunks(n) for n in (0, 1, 64, 65, 128, 129)] == [1, 1, 1, 2, 2, 3]


_SCRIPT = """
import os, sys
from scaleup import runtime as rt
rt.init()
print("env", os.environ["RANK"], os.environ["WORLD_SIZE"], os.environ["LOCAL_RANK"],
      os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"]) > 0)
if rt.rank() == 1 and sys.argv[1] == "fail":
    raise ValueError("boom")
rt.barrier()
"""


def test_run_accepts_nproc_per_node_and_prefixes_output(tmp_path: Path) -> None:
    script = tmp_path / "env.py"
    script.write_text(_SCRIPT)
    result = CliRunner().invoke(app, ["run", "--nproc-per-node", "2", str(script), "ok"])
    assert result.exit_code == 0, result.output
    assert "[rank0]: env 0 2 0 127.0.0.1 True" in result.output
    assert "[rank1]: env 1 2 1 127.0.0.1 True" in result.output


def test_failing_rank_is_prefixed_and_summarised(tmp_path: Path) -> None:
    script = tmp_path / "fail.py"
    script.write_text(_SCRIPT)
    result = CliRunner().invoke(app, ["run", "-n", "3", "--timeout", "10", str(script), "fail"])
    assert result.exit_code == 2
    lines = result.output.strip().splitlines()
    assert "[rank1]: ValueError: boom" in lines
    assert lines[-1] == "error: rank 1 failed (exit code 1)"
    tracebacks = [line for line in lines if "Traceback" in line]
    assert tracebacks == ["[rank1]: Traceback (most recent call last):"]  # the others: one line
    stopped = [line for line in lines if "stops" in line]
    assert sorted(line.split(":")[0] for line in stopped) == ["[rank0]", "[rank2]"]


def _exchange(sizes: list[int]) -> bool:
    api.init_process_group(backend="local")
    me = rt.rank()
    ok = True
    works = []
    for i, n in enumerate(sizes):  # every size both ways, isend and blocking recv interleaved
        data = (np.arange(n, dtype=np.uint8) + i + me).astype(np.uint8)
        works.append(api.isend(data, 1 - me))
    for i, n in enumerate(sizes):
        got = np.zeros(n, dtype=np.uint8)
        api.recv(got, 1 - me)
        ok = ok and bool(np.array_equal(got, (np.arange(n) + i + 1 - me).astype(np.uint8)))
    for work in works:
        work.wait()
    return ok


@settings(max_examples=10)
@given(sizes=st.lists(st.integers(0, 3 * p2p.DEFAULT_SLOT_BYTES), min_size=1, max_size=4))
def test_messages_arrive_whole_and_in_order(sizes: list[int]) -> None:
    assert rt.launch(_exchange, 2, sizes, transport="local", timeout_s=20) == [True, True]
