"""``scaleup sweep`` (a spec's points on Dask, resumable) and ``scaleup report`` (plots + index).

``scaleup sweep spec.toml -o results.parquet`` runs every point on a local Dask cluster (one
worker process per core), ``--scheduler tcp://host:8786`` on a running one, ``--serial`` in this
process; a progress bar on stderr shows done/total, rate and ETA. Ctrl-C keeps every finished
point: run the same command with ``--resume`` to do the rest. ``scaleup report results.parquet -o
report/`` writes PNGs, ``index.md`` and a self-contained ``index.html``.
"""

from __future__ import annotations

import contextlib
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer
from rich.markup import escape

from scaleup.cli import render
from scaleup.errors import UsageError

if TYPE_CHECKING:
    from scaleup.cli.sweep_bar import SweepBar
    from scaleup.sweep import SweepSummary

__all__ = ["register", "report_cmd", "sweep_cmd"]

#: Exit code after Ctrl-C (128 + SIGINT), as shells report it.
EXIT_INTERRUPTED = 130


def _terminate(signum: int, frame: Any) -> None:
    """SIGTERM handler: stop as Ctrl-C does."""
    raise KeyboardInterrupt


@contextlib.contextmanager
def _sigterm_interrupts() -> Iterator[None]:
    """Inside the block, `kill` (SIGTERM) stops as cleanly as Ctrl-C."""
    previous = signal.getsignal(signal.SIGTERM)
    signal.signal(signal.SIGTERM, _terminate)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _check_placement(serial: bool, scheduler: str | None, workers: int | None) -> None:
    """Refuse flags that contradict each other about where the points run."""
    if serial and (scheduler or workers):
        raise UsageError(
            "--serial runs without Dask; drop --scheduler/--workers", source="--serial"
        )
    if scheduler and workers:
        raise UsageError(
            "--workers sizes the local cluster; a --scheduler cluster has its own",
            source="--workers",
        )


def _say_interrupted(stop: KeyboardInterrupt, bar: SweepBar, output: Path) -> None:
    """Say on stderr how many points are saved and how to finish the sweep."""
    from scaleup.sweep import SweepStopped

    saved, total = (
        (stop.saved, stop.total) if isinstance(stop, SweepStopped) else (bar.done, bar.total)
    )
    render.err_console.print(
        escape(
            f"interrupted: {saved} of {total} points are saved in {output}; "
            "run the same command with --resume to finish"
        )
    )


def _print_summary(
    summary: SweepSummary, output: Path, *, json_out: bool, csv_out: bool = False
) -> None:
    """Note damaged parts set aside (stderr), then print what the sweep did."""
    for part in summary.damaged:
        render.err_console.print(
            escape(f"note: {part} was damaged; set aside, its points were evaluated again")
        )
    if json_out or csv_out:
        render.print_records(summary, [summary], csv_out=csv_out)
        return
    left = f", {summary.pending} left (--resume continues)" if summary.pending else ""
    render.console.print(
        escape(
            f"{summary.total} points: {summary.evaluated} evaluated ({summary.errors} errors), "
            f"{summary.resumed} already done{left}; {summary.wall_s:.1f} s, {summary.mode}, "
            f"{summary.workers} worker(s), {summary.batch_size} points/task -> {output}"
        )
    )


_SPEC_ARGUMENT = typer.Argument(..., help="Sweep spec (TOML); see examples/sweep.toml.")
_OUTPUT_OPTION = typer.Option(
    ..., "-o", "--output", help="results.parquet (a Parquet dataset) or results.csv."
)
_SCHEDULER_OPTION = typer.Option(
    None, "--scheduler", help="Address of a running Dask scheduler, tcp://HOST:PORT."
)
_SERIAL_OPTION = typer.Option(False, "--serial", help="Run in this process, without Dask.")
_RESUME_OPTION = typer.Option(
    False, "--resume", help="Keep finished points in OUTPUT; run only the rest."
)
_WORKERS_OPTION = typer.Option(
    None, "--workers", min=1, help="Local cluster worker processes (default: one per core)."
)
_FORCE_OPTION = typer.Option(False, "--force", help="Replace an existing OUTPUT.")
_RETRY_ERRORS_OPTION = typer.Option(
    False, "--retry-errors", help="With --resume: run failed points again."
)
_BATCH_SIZE_OPTION = typer.Option(
    None, "--batch-size", min=1, help="Points per Dask task (default: auto, at most 100)."
)
_MAX_POINTS_OPTION = typer.Option(
    None, "--max-points", min=0, help="Stop after this many new points."
)
_QUIET_OPTION = typer.Option(False, "--quiet", "-q", help="No progress bar.")
_JSON_OPTION = typer.Option(False, "--json", help="Print the summary as JSON.")
_CSV_OPTION = typer.Option(False, "--csv", help="Print the summary as one CSV row.")


def _provenance(spec: Path) -> dict[str, str]:
    """What the report says produced the results: the spec as given, the version, the date."""
    import datetime

    from scaleup import __version__

    now = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
    return {"spec": str(spec), "scaleup_version": __version__, "started_utc": now}


def sweep_cmd(
    spec: Path = _SPEC_ARGUMENT,
    output: Path = _OUTPUT_OPTION,
    scheduler: str | None = _SCHEDULER_OPTION,
    serial: bool = _SERIAL_OPTION,
    resume: bool = _RESUME_OPTION,
    workers: int | None = _WORKERS_OPTION,
    force: bool = _FORCE_OPTION,
    retry_errors: bool = _RETRY_ERRORS_OPTION,
    batch_size: int | None = _BATCH_SIZE_OPTION,
    max_points: int | None = _MAX_POINTS_OPTION,
    quiet: bool = _QUIET_OPTION,
    json_out: bool = _JSON_OPTION,
    csv_out: bool = _CSV_OPTION,
) -> None:
    """Run every point of a sweep spec; results are written as they complete."""
    from scaleup.cli.sweep_bar import SweepBar
    from scaleup.sweep import expand_spec, load_spec, run_sweep

    render.check_one_format(json_out, csv_out)
    _check_placement(serial, scheduler, workers)
    loaded, base = load_spec(spec)
    points = expand_spec(loaded, base=base, source=str(spec))
    bar = SweepBar(loaded.name, len(points), quiet=quiet)
    with _sigterm_interrupts():
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
                    progress=bar.update,
                    provenance=_provenance(spec),
                )
            finally:
                bar.stop()
        except KeyboardInterrupt as stop:
            _say_interrupted(stop, bar, output)
            raise typer.Exit(EXIT_INTERRUPTED) from None
    _print_summary(summary, output, json_out=json_out, csv_out=csv_out)


def report_cmd(
    results: Path = typer.Argument(
        ..., help="A sweep's output: results.parquet (dataset or file) or .csv."
    ),
    output: Path = typer.Option(
        ..., "-o", "--output", help="Directory for the PNGs, index.md and index.html."
    ),
    title: str | None = typer.Option(None, "--title", help="Page title."),
    json_out: bool = typer.Option(False, "--json", help="Print what was written as JSON."),
    csv_out: bool = typer.Option(False, "--csv", help="Print what was written as one CSV row."),
) -> None:
    """Plot a sweep's results and write an index page (Markdown and self-contained HTML)."""
    from scaleup.cli.sweep_report import build_report

    render.check_one_format(json_out, csv_out)
    with render.activity("report") as step:
        summary = build_report(results, output, title=title, progress=step)
    if json_out or csv_out:
        render.print_records(summary, [summary], csv_out=csv_out)
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
