"""The typer application: command groups registered from their modules; errors become one line.

Every :class:`~scaleup.errors.ScaleupError` that reaches the top is printed as one line on stderr
and the process exits with code 2 (a command may choose 1, e.g. a schedule that fails
verification). ``--debug`` shows the traceback instead. A library error names the field it is
about (``source="channels"``); when that is a parameter of the command that ran, the line names
its flag instead (``--channels``).
"""

from __future__ import annotations

from types import ModuleType
from typing import Any

import click
import typer
from typer.core import TyperGroup

from scaleup.cli import bench, calibrate, compare, plan, run, schedule, sweep, topo
from scaleup.errors import ScaleupError

__all__ = ["COMMAND_MODULES", "app", "main"]

#: Modules that each define ``register(app)``; one per command group, in help order.
COMMAND_MODULES: tuple[ModuleType, ...] = (
    topo,
    schedule,
    bench,
    calibrate,
    run,
    plan,
    compare,
    sweep,
)


class ScaleupGroup(TyperGroup):
    """A click group that turns library errors into one line and an exit code."""

    def resolve_command(self, ctx: Any, args: list[str]) -> Any:
        ctx.meta["scaleup.args"] = list(args)  # the command line below the root, for _flag_for
        return super().resolve_command(ctx, args)

    def invoke(self, ctx: Any) -> Any:
        try:
            return super().invoke(ctx)
        except ScaleupError as error:
            if ctx.obj and ctx.obj.get("debug"):
                raise
            exit_code = getattr(error, "exit_code", 2)
            if error.source is not None:
                error.source = _flag_for(self, ctx, error.source)
            line = error.one_line().replace("\r", "\\r").replace("\n", "\\n")  # echoed input
            click.echo(f"error: {line}", err=True)
            raise typer.Exit(exit_code) from None


def _flag_for(group: Any, ctx: Any, field: str) -> str:
    """The flag (``--channels``) or argument (``NAME|FILE``) of the command that ran whose
    parameter is named ``field``; ``field`` itself when there is none. (Duck-typed: typer's
    commands are not click's classes.)"""
    command = group
    for word in ctx.meta.get("scaleup.args", []):
        if not hasattr(command, "get_command"):
            break
        command = command.get_command(ctx, word)
    if command is None or hasattr(command, "get_command"):
        return field
    for param in command.params:
        if param.name == field:
            if param.param_type_name == "option":
                return str(max(param.opts, key=len))
            return str(param.metavar or field.upper())
    return field


app = typer.Typer(
    cls=ScaleupGroup,
    name="scaleup",
    help="Model, simulate and run memory-semantic scale-up fabrics and their collectives.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=True,  # --install-completion / --show-completion (bash, zsh, fish, pwsh)
)


def _version(value: bool) -> None:
    """``--version``: print the installed version and stop."""
    if value:
        from scaleup import __version__

        typer.echo(f"scaleup {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    ctx: typer.Context,
    debug: bool = typer.Option(
        False, "--debug", help="Show tracebacks instead of one-line errors."
    ),
    _version_flag: bool = typer.Option(
        False,
        "--version",
        callback=_version,
        is_eager=True,
        expose_value=False,
        help="Print the version and exit.",
    ),
) -> None:
    """scaleup: fabrics, collectives, memory semantics, model fit, sweeps."""
    ctx.obj = {"debug": debug}


def _register_all() -> None:
    for module in COMMAND_MODULES:
        module.register(app)


_register_all()


def main() -> None:
    """Console-script entry point (also ``python -m scaleup``)."""
    app(prog_name="scaleup")
