"""The progress bar of ``scaleup sweep`` on stderr: points done, rate, errors and the sweep's ETA.

Apart from :mod:`scaleup.cli.sweep` so that rich's progress machinery is imported when a sweep
runs, not by every command of the app.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.markup import escape
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    ProgressColumn,
    Task,
    TextColumn,
    TimeElapsedColumn,
)
from rich.text import Text

from scaleup.cli import render

if TYPE_CHECKING:
    from scaleup.sweep import SweepProgress

__all__ = ["SweepBar"]


class _RateColumn(ProgressColumn):
    """Points per second over this run (resumed points do not count)."""

    def render(self, task: Task) -> Text:
        """The rate as ``N pt/s`` (``-`` before the first point of this run)."""
        rate = task.fields.get("rate")
        return Text(f"{rate:,.1f} pt/s" if rate else "- pt/s", style="cyan")


class _EtaColumn(ProgressColumn):
    """Time left as the sweep estimates it, by cost class (:mod:`scaleup.sweep.progress`), not
    by counting points: a few dear points after many cheap ones are not "seconds" away."""

    def render(self, task: Task) -> Text:
        """``ETA h:mm:ss`` (``-:--:--`` before the first point of this run finished)."""
        eta = task.fields.get("eta")
        if eta is None:
            return Text("ETA -:--:--", style="cyan")
        minutes, seconds = divmod(round(eta), 60)
        hours, minutes = divmod(minutes, 60)
        return Text(f"ETA {hours}:{minutes:02d}:{seconds:02d}", style="cyan")


class SweepBar:
    """The progress bar on stderr, and how far the sweep got (for the interrupted message)."""

    def __init__(self, name: str, total: int, *, quiet: bool) -> None:
        self.progress = Progress(
            TextColumn("[bold]{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            _RateColumn(),
            TextColumn("[red]{task.fields[errors]} errors"),
            TimeElapsedColumn(),
            _EtaColumn(),
            console=render.err_console,
            disable=quiet,
            transient=False,
        )
        self.task = self.progress.add_task(escape(name), total=total, errors=0, rate=0.0, eta=None)
        self.done, self.total, self.started = 0, total, False

    def update(self, p: SweepProgress) -> None:
        """Show where the sweep stands; the bar starts at the first report."""
        if not self.started:  # only once the output checks passed: errors stay one line
            self.progress.start()
            self.started = True
        new = p.done - p.resumed
        self.done, self.total = p.done, p.total
        self.progress.update(
            self.task,
            completed=p.done,
            total=p.total,
            errors=p.errors,
            rate=new / p.elapsed_s if p.elapsed_s > 0 and new else 0.0,
            eta=p.eta_s,
        )

    def stop(self) -> None:
        """Stop the bar, if it was started."""
        if self.started:
            self.progress.stop()
