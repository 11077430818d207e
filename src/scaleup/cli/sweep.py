"""``scaleup sweep`` (a spec's points on Dask, resumable) and ``scaleup report`` (plots + index).

``scaleup sweep spec.toml -o results.parquet`` runs every point on a local Dask cluster (one
worker process per core), ``--scheduler tcp://host:8786`` on a running one, ``--serial`` in this
process; a progress bar on stderr shows done/total, rate and ETA. Ctrl-C keeps every finished
point: run the same command with ``--resume`` to do the rest. ``scaleup report results.parquet -o
report/`` writes PNGs, ``index.md`` and a self-contained ``index.html``.
"""

from __future__ import annotations

import signal
from pathlib import Path
from typing import Any

import typer
from rich.markup import escape
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    ProgressColumn,
    Task,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)
from rich.text import Text

from scaleup.cli import render
from scaleup.errors import UsageError

__all__ = ["register", "report_cmd", "sweep_cmd"]

#: Exit code after Ctrl-C (128 + SIGINT), as shells report it.
EXIT_INTERRUPTED = 130


class _RateColumn(ProgressColumn):
    """Points per second over this run (resumed points do not count)."""

    def render(self, task: Task) -> Text:
        rate = task.fields.get("rate")
        return Text(f"{rate:,.1f} pt/s" if rate else "- pt/s", style="cyan")


def _terminate(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt


def sweep_cmd(
    spec: Path = typer.Argument(..., help="Sweep spec (TOML); see examples/sweep.toml."),
    output: Path = typer.Option(
        ..., "-o", "--output", help="results.parquet (a Parquet dataset) or results.csv."
    ),
    scheduler: str | None = typer.Option(
        None, "--scheduler", help="Address of a running Dask scheduler, tcp://HOST:PORT."
    ),
    serial: bool = typer.Option(False, "--serial", help="Run in this process, without Dask."),
    resume: bool = typer.Option(
        False, "--resume", help="Keep finished points in OUTPUT; run only the rest."
    ),
    workers: int | None = typer.Option(
        None, "--workers", min=1, help="Local cluster worker processes (default: one per core)."
    ),
    force: bool = typer.Option(False, "--force", help="Replace an existing OUTPUT."),
    retry_errors: bool = typer.Option(
        False, "--retry-errors", help="With --resume: run failed points again."
    ),
    batch_size: int | None = typer.Option(
        None, "--batch-size", min=1, help="Points per Dask task (default: auto, at most 100)."
    ),
    max_points: int | None = typer.Option(
        None, "--max-points", min=0, help="Stop after this many new points."
    ),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress bar."),
    json_out: bool = typer.Option(False, "--json", help="Print the summary as JSON."),
) -> None:
    """Run every point of a sweep spec; results are written as they complete."""
    from scaleup.sweep import SweepStopped, expand_spec, load_spec, run_sweep

    if serial and (scheduler or workers):
        raise UsageError(
            "--serial runs without Dask; drop --scheduler/--workers", source="--serial"
        )
    if scheduler and workers:
        raise UsageError(
            "--workers sizes the local cluster; a --scheduler cluster has its own",
            source="--workers",
        )
    loaded, base = load_spec(spec)
    points = expand_spec(loaded, base=base, source=str(spec))
    progress = Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        _RateColumn(),
        TextColumn("[red]{task.fields[errors]} errors"),
        TimeElapsedColumn(),
        TextColumn("ETA"),
        TimeRemainingColumn(),
        console=render.err_console,
        disable=quiet,
        transient=False,
    )
    task = progress.add_task(escape(loaded.name), total=len(points), errors=0, rate=0.0)
    state: dict[str, Any] = {"done": 0, "total": len(points)}

    def on_progress(p: Any) -> None:
        if not state.get("started"):  # only once the output checks passed: errors stay one line
            progress.start()
            state["started"] = True
        new = p.done - p.resumed
        state.update(done=p.done, total=p.total)
        progress.update(
            task,
            completed=p.done,
            total=p.total,
            errors=p.errors,
            rate=new / p.elapsed_s if p.elapsed_s > 0 and new else 0.0,
        )

    previous = signal.getsignal(signal.SIGTERM)
    signal.signal(signal.SIGTERM, _terminate)  # `kill` stops as cleanly as Ctrl-C
    try:
        try:
            summary = run_sweep(
                points,
                output,
                scheduler=scheduler,
                serial=serial,
                n_workers=workers,
                resume=resume,
                overwrite=force,
                retry_errors=retry_errors,
                batch_size=batch_size,
                max_points=max_points,
                progress=on_progress,
            )
        finally:
            if state.get("started"):
                progress.stop()
    except KeyboardInterrupt as stop:
        saved, total = (
            (stop.saved, stop.total)
            if isinstance(stop, SweepStopped)
            else (state["done"], state["total"])
        )
        render.err_console.print(
            escape(
                f"interrupted: {saved} of {total} points are saved in {output}; "
                "run the same command with --resume to finish"
            )
        )
        raise typer.Exit(EXIT_INTERRUPTED) from None
    finally:
        signal.signal(signal.SIGTERM, previous)
    for part in summary.damaged:
        render.err_console.print(
            escape(f"note: {part} was damaged; set aside, its points were evaluated again")
        )
    if json_out:
        render.print_json(summary)
        return
    left = f", {summary.pending} left (--resume continues)" if summary.pending else ""
    render.console.print(
        escape(
            f"{summary.total} points: {summary.evaluated} evaluated ({summary.errors} errors), "
            f"{summary.resumed} already done{left}; {summary.wall_s:.1f} s, {summary.mode}, "
            f"{summary.workers} worker(s), {summary.batch_size} points/task -> {output}"
        )
    )


def report_cmd(
    results: Path = typer.Argument(
        ..., help="A sweep's output: results.parquet (dataset or file) or .csv."
    ),
    output: Path = typer.Option(
        ..., "-o", "--output", help="Directory for the PNGs, index.md and index.html."
    ),
    title: str | None = typer.Option(None, "--title", help="Page title."),
    json_out: bool = typer.Option(False, "--json", help="Print what was written as JSON."),
) -> None:
    """Plot a sweep's results and write an index page (Markdown and self-contained HTML)."""
    from scaleup.cli.sweep_report import build_report

    summary = build_report(results, output, title=title)
    if json_out:
        render.print_json(summary)
        return
    render.console.print(
        escape(
            f"{summary.points} points ({summary.errors} errors): {len(summary.images)} plots, "
            f"{summary.index_md}, {summary.index_html}"
        )
    )


def register(app: typer.Typer) -> None:
    """Add the ``sweep`` and ``report`` commands to the scaleup app."""
    app.command("sweep")(sweep_cmd)
    app.command("report")(report_cmd)
