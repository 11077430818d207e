"""``scaleup bench --plot``: busbw against message size, one line per topology (matplotlib, Agg)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from scaleup.cli.plot_axes import human_label, new_figure, save_figure, set_size_axis
from scaleup.report import BenchRow

__all__ = ["busbw_figure", "plot_busbw"]


def plot_busbw(
    series: Mapping[str, Sequence[BenchRow]], path: str | Path, *, title: str | None = None
) -> Any:
    """Write a PNG (or any matplotlib format, by suffix) of busbw vs size; return the Figure.

    Parameters
    ----------
    series
        ``{label: rows}``; one line per label.
    path
        Output file.
    title
        Figure title (default: the collective of the first row).
    """
    fig = busbw_figure(series, title=title)
    save_figure(fig, path)
    return fig


def busbw_figure(series: Mapping[str, Sequence[BenchRow]], *, title: str | None = None) -> Any:
    """The Figure of :func:`plot_busbw` (busbw vs size, one line per label), unsaved."""
    fig = new_figure(8, 4.8)
    ax = fig.add_subplot(1, 1, 1)
    collective, sizes = "", list[int]()
    for label, rows in series.items():
        points = [(r.bytes, r.busbw_gb_per_s) for r in rows if r.bytes > 0]
        if not points:
            continue
        collective = collective or human_label(rows[0].collective, "")
        xs, ys = zip(*points, strict=True)
        sizes += xs
        ax.plot(xs, ys, marker="o", markersize=3, label=human_label(label, "topology"))
    set_size_axis(ax, sizes)
    ax.set_ylabel("bus bandwidth (GB/s per direction, nccl-tests factors)")
    ax.set_ylim(bottom=0)
    ax.set_title(title or f"{collective or 'collective'}: simulated bus bandwidth by message size")
    ax.grid(True, which="major", alpha=0.3)
    if ax.get_lines():
        ax.legend(loc="upper left", title="topology")
    return fig
