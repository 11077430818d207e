"""Ranks that misbehave on purpose, for the launcher fault tests.

As a rank script: ``scaleup run -n N fault_script.py MODE BAD PIDDIR``. As a launcher program:
``python fault_script.py --launch N TRANSPORT MODE BAD PIDDIR`` calls ``runtime.launch``.

Every rank writes ``<pid> <run prefix>`` to ``PIDDIR/rank<r>``, allocates symmetric memory, and
then rank BAD does MODE while the others run all_reduce in a loop (so they wait for it):
``raise`` (ValueError), ``die`` (SIGKILL itself), ``hang`` (sleeps), ``busy`` (spins in Python,
never entering the runtime: the rank a dead launcher would orphan), ``ok`` (behaves).

It also holds the tests' helpers for finding those ranks and checking that they are gone.
"""

from __future__ import annotations

import os
import signal
import sys
import time
from collections.abc import Callable
from pathlib import Path

from scaleup import runtime as rt
from scaleup.errors import ScaleupError


def rank_main(mode: str, bad: int, piddir: str) -> None:
    group = rt.init()
    prefix = group.transport.prefix
    path = Path(piddir) / f"rank{rt.rank()}"
    path.with_suffix(".tmp").write_text(f"{os.getpid()} {prefix}")
    path.with_suffix(".tmp").rename(path)  # whole or absent: the test polls for it
    x = rt.alloc(1000, "float32")
    rt.barrier()
    if rt.rank() == bad:
        if mode == "raise":
            raise ValueError("boom")
        if mode == "die":
            os.kill(os.getpid(), signal.SIGKILL)
        if mode == "hang":
            time.sleep(3600)
        while mode == "busy":
            pass
    rounds = 3 if mode == "ok" else 10**9
    for _ in range(rounds):
        rt.all_reduce(x)


def launcher_main(world: int, transport: str, mode: str, bad: int, piddir: str) -> int:
    """``launch`` as a program: the error's one line on stderr and its exit code, as the CLI."""
    try:
        rt.launch(rank_main, world, mode, bad, piddir, transport=transport)
    except ScaleupError as error:
        print(f"error: {error.one_line()}", file=sys.stderr)
        return getattr(error, "exit_code", 2)
    return 0


# ---- for the tests -------------------------------------------------------------------------
def gone(pid: int) -> bool:
    """The process has exited (a zombie awaiting its reaper counts as gone)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return True
    return state == "Z"


def wait_until(predicate: Callable[[], bool], limit_s: float) -> bool:
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.05)
    return predicate()


def read_ranks(piddir: Path, world: int, limit_s: float) -> tuple[list[int], str]:
    """The ranks' pids and their run prefix, once every rank has written its file."""
    files = [piddir / f"rank{r}" for r in range(world)]
    assert wait_until(lambda: all(f.exists() for f in files), limit_s), "ranks did not start"
    fields = [f.read_text().split() for f in files]
    return [int(pid) for pid, _ in fields], fields[0][1]


if __name__ == "__main__":
    if sys.argv[1] == "--launch":
        args = sys.argv[2:]
        sys.exit(launcher_main(int(args[0]), args[1], args[2], int(args[3]), args[4]))
    rank_main(sys.argv[1], int(sys.argv[2]), sys.argv[3])
