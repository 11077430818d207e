"""``scaleup run -n N script.py [args]``: start N ranks of a script, like torchrun."""

from __future__ import annotations

import os

import typer

from scaleup.errors import UsageError

__all__ = ["register"]


def register(app: typer.Typer) -> None:
    """Add the ``run`` command to the app."""

    @app.command(
        "run",
        context_settings={"allow_extra_args": True, "ignore_unknown_options": True},
    )
    def run(
        ctx: typer.Context,
        script: str = typer.Argument(..., help="Python script every rank runs."),
        nproc: int = typer.Option(2, "-n", "--nproc", help="Number of ranks (worker processes)."),
        transport: str = typer.Option(
            "shm", "--transport", "-t", help="shm (shared memory) or pipe."
        ),
        timeout_s: float = typer.Option(30.0, "--timeout", help="Seconds a rank waits for a peer."),
    ) -> None:
        """Run SCRIPT on N ranks; inside it, scaleup.runtime.init() gives rank and world size."""
        from scaleup.runtime.launch import run_script

        if not os.path.isfile(script):
            raise UsageError(f"no such script: {script}", source="script")
        run_script(script, list(ctx.args), nproc, transport=transport, timeout_s=timeout_s)
