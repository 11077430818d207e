"""``scaleup run -n N script.py [args]``: start N ranks of a script, like torchrun.

``--nproc-per-node`` is torchrun's spelling of ``-n``. Every line a rank writes is prefixed with
``[rankR]:`` (stdout to stdout, stderr to stderr); a rank that stops only because another failed
says so in one line, and the launcher ends with one line naming the rank that failed.

``scaleup run --cleanup`` removes the shared-memory segments that killed launchers left behind
(this user's, of runs none of whose processes is alive); every run also does that first.
"""

from __future__ import annotations

import os
import sys
import threading

import typer

from scaleup.errors import UsageError

__all__ = ["register"]

#: The flag a library argument comes from, for one-line errors that name what the user typed.
_FLAGS = {"world_size": "-n/--nproc", "transport": "--transport", "timeout_s": "--timeout"}


_WRITE_LOCK = threading.Lock()  # one relay thread per rank and stream: whole lines only


def _prefixed(rank: int, is_err: bool, line: str) -> None:
    """Write one line of a rank's output with its rank in front, as torchrun's ``[rank0]:``."""
    stream = sys.stderr if is_err else sys.stdout
    text = line if line.endswith("\n") else line + "\n"
    with _WRITE_LOCK:
        stream.write(f"[rank{rank}]: {text}")
        stream.flush()


def register(app: typer.Typer) -> None:
    """Add the ``run`` command to the app."""

    @app.command(
        "run",
        context_settings={"allow_extra_args": True, "ignore_unknown_options": True},
    )
    def run(
        ctx: typer.Context,
        script: str | None = typer.Argument(None, help="Python script every rank runs."),
        nproc: int = typer.Option(
            2,
            "-n",
            "--nproc",
            "--nproc-per-node",
            "--nproc_per_node",
            help="Number of ranks (worker processes), 1 to 1024 (torchrun: --nproc-per-node).",
        ),
        transport: str = typer.Option(
            "shm", "--transport", "-t", help="shm (shared memory) or pipe."
        ),
        timeout_s: float = typer.Option(
            30.0, "--timeout", help="Seconds a rank may make no progress while a peer waits."
        ),
        cleanup: bool = typer.Option(
            False, "--cleanup", help="Only remove segments left by killed launchers, then exit."
        ),
        no_prefix: bool = typer.Option(
            False, "--no-prefix", help="Ranks write straight to this terminal, without [rankR]:."
        ),
    ) -> None:
        """Run SCRIPT on N ranks; inside it, scaleup.runtime.init() gives rank and world size.

        Exits 0 on success, 2 when a rank failed (named), 128 + signal when interrupted.
        """
        from scaleup.runtime.launch import run_script
        from scaleup.runtime.shm import reclaim_dead_runs

        if cleanup:
            if script is not None:
                raise UsageError("--cleanup takes no script", source="--cleanup")
            removed = reclaim_dead_runs()
            typer.echo(f"removed {len(removed)} segment{'s' * (len(removed) != 1)} of dead runs")
            return
        if script is None:
            raise UsageError("give the SCRIPT every rank runs (or --cleanup)", source="script")
        if not os.path.isfile(script):
            raise UsageError(f"no such script: {script}", source="script")
        try:
            run_script(
                script,
                list(ctx.args),
                nproc,
                transport=transport,
                timeout_s=timeout_s,
                relay=None if no_prefix else _prefixed,
            )
        except UsageError as error:
            error.source = _FLAGS.get(error.source or "", error.source)
            raise
