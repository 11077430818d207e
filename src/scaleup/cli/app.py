"""The typer application: command groups registered from their modules; errors become one line.

Every :class:`~scaleup.errors.ScaleupError` that reaches the top is printed as one line on stderr
and the process exits with code 2 (a command may choose 1, e.g. a schedule that fails
verification). ``--debug`` shows the traceback instead.
"""

from __future__ import annotations

from types import ModuleType
from typing import Any

import click
import typer
from typer.core import TyperGroup

from scaleup.cli import bench, plan, run, schedule, sweep, topo
from scaleup.errors import ScaleupError

__all__ = ["COMMAND_MODULES", "app", "main"]

#: Modules that each define ``register(app)``; one per command group, in help order.
COMMAND_MODULES: tuple[ModuleType, ...] = (topo, schedule, bench, run, plan, sweep)


class ScaleupGroup(TyperGroup):
    """A click group that turns library errors into one line and an exit code."""

    def invoke(self, ctx: Any) -> Any:
        try:
            return super().invoke(ctx)
        except ScaleupError as error:
            if ctx.obj and ctx.obj.get("debug"):
                raise
            exit_code = getattr(error, "exit_code", 2)
            click.echo(f"error: {error.one_line()}", err=True)
            raise typer.Exit(exit_code) from None


app = typer.Typer(
    cls=ScaleupGroup,
    name="scaleup",
    help="Model, simulate and run memory-semantic scale-up fabrics and their collectives.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)


@app.callback()
def _root(
    ctx: typer.Context,
    debug: bool = typer.Option(False, "--debug", help="Show tracebacks instead of one-line errors."),
) -> None:
    """scaleup: fabrics, collectives, memory semantics, model fit, sweeps."""
    ctx.obj = {"debug": debug}


def _register_all() -> None:
    for module in COMMAND_MODULES:
        module.register(app)


_register_all()


def main() -> None:
    """Console-script entry point."""
    app()
