"""The figures of a sweep report, drawn on matplotlib's Agg canvas (no pyplot, no global state).

Each function draws one PNG: bandwidth and time against message size, a categorical map of the
fastest algorithm by size, and an annotated heatmap for planner points. Axes carry their units.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from scaleup.units import format_bytes

__all__ = ["category_map", "heatmap", "line_plot"]


def _figure(width: float = 9.0, height: float = 4.5) -> Any:
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    figure = Figure(figsize=(width, height), dpi=110, layout="constrained")
    FigureCanvasAgg(figure)
    return figure


def _size_axis(axis: Any, sizes: Sequence[int]) -> None:
    axis.set_xscale("log", base=2)
    ticks = sorted(set(sizes))
    step = max(1, len(ticks) // 10)
    axis.set_xticks(ticks[::step])
    axis.set_xticklabels([format_bytes(t) for t in ticks[::step]], rotation=45, ha="right")
    axis.set_xlabel("message size (bytes, powers of 1024)")


def line_plot(path: Path, title: str, series: dict[str, dict[int, dict[str, Any]]]) -> None:
    """busbw (linear) and time (log) against size; one line per series (label -> size -> row)."""
    figure = _figure()
    bw, tm = figure.subplots(1, 2)
    sizes: list[int] = []
    for label, by_size in series.items():
        xs = sorted(by_size)
        sizes.extend(xs)
        bw.plot(
            xs, [by_size[x]["busbw_gb_per_s"] for x in xs], marker="o", markersize=3, label=label
        )
        tm.plot(xs, [by_size[x]["time_us"] for x in xs], marker="o", markersize=3, label=label)
    for axis in (bw, tm):
        _size_axis(axis, sizes)
        axis.grid(True, which="major", alpha=0.3)
    bw.set_ylabel("busbw (GB/s, 1e9 B/s per direction)")
    bw.set_ylim(bottom=0)
    tm.set_yscale("log")
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

    tm.yaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
    tm.yaxis.set_major_formatter(FuncFormatter(lambda value, _pos: f"{value:g}"))
    tm.yaxis.set_minor_formatter(NullFormatter())
    tm.set_ylabel("time (µs, log scale)")
    bw.legend(fontsize=7, loc="upper left")
    figure.suptitle(title)
    figure.savefig(path)


def category_map(path: Path, title: str, grid: dict[str, dict[int, str]]) -> None:
    """One row per series, one cell per size, coloured by the category (algorithm/protocol)."""
    from matplotlib.colors import ListedColormap
    from matplotlib.patches import Patch

    labels = sorted({v for row in grid.values() for v in row.values()})
    sizes = sorted({s for row in grid.values() for s in row})
    names = list(grid)
    code = {label: i for i, label in enumerate(labels)}
    matrix = [[code.get(grid[n].get(s, ""), float("nan")) for s in sizes] for n in names]
    from matplotlib import colormaps

    base = colormaps["tab20" if len(labels) > 10 else "tab10"]
    cmap = ListedColormap([base(i % base.N) for i in range(max(len(labels), 1))])
    figure = _figure(9.0, 1.2 + 0.45 * len(names))
    axis = figure.subplots()
    axis.imshow(
        matrix, aspect="auto", cmap=cmap, vmin=-0.5, vmax=len(labels) - 0.5, interpolation="nearest"
    )
    step = max(1, len(sizes) // 12)
    axis.set_xticks(range(0, len(sizes), step))
    axis.set_xticklabels([format_bytes(s) for s in sizes[::step]], rotation=45, ha="right")
    axis.set_xlabel("message size (bytes, powers of 1024)")
    axis.set_yticks(range(len(names)))
    axis.set_yticklabels(names)
    axis.set_ylabel("topology")
    handles = [Patch(color=cmap(code[label]), label=label) for label in labels]
    figure.legend(
        handles=handles, title="algorithm/protocol", fontsize=7, loc="outside right upper"
    )
    figure.suptitle(title)
    figure.savefig(path)


def heatmap(
    path: Path,
    title: str,
    rows: list[str],
    cols: list[Any],
    values: dict[tuple[str, Any], float],
    cbar_label: str,
    fmt: str,
    cmap: str,
) -> None:
    """Rows x tp columns, each cell annotated; a fraction-of-HBM map is centred on 1.0 (full)."""
    matrix = [[values.get((r, c), float("nan")) for c in cols] for r in rows]
    figure = _figure(max(5.0, 1.2 * len(cols) + 3), 1.4 + 0.5 * len(rows))
    axis = figure.subplots()
    norm = None
    known = [v for v in values.values() if v == v]
    if "fraction" in cbar_label and known and min(known) < 1.0 < max(known):
        from matplotlib.colors import TwoSlopeNorm

        norm = TwoSlopeNorm(vmin=min(known), vcenter=1.0, vmax=max(known))  # 1.0 = HBM full
    image = axis.imshow(matrix, aspect="auto", cmap=cmap, norm=norm, interpolation="nearest")
    axis.set_xticks(range(len(cols)))
    axis.set_xticklabels([str(c) for c in cols])
    axis.set_xlabel("tensor parallelism (tp)")
    axis.set_yticks(range(len(rows)))
    axis.set_yticklabels(rows)
    axis.set_ylabel("topology and other axes")
    for i, row in enumerate(matrix):
        for j, value in enumerate(row):
            if value == value:  # not NaN
                axis.text(j, i, format(value, fmt), ha="center", va="center", fontsize=7)
    figure.colorbar(image, ax=axis, label=cbar_label)
    figure.suptitle(title)
    figure.savefig(path)
