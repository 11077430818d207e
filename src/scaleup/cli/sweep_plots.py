"""The figures of a sweep report, drawn on matplotlib's Agg canvas (no pyplot, no global state).

Each function draws one PNG: bandwidth and time against message size, a categorical map of the
fastest algorithm by size, and an annotated heatmap for planner points. Axes carry their units.
"""

from __future__ import annotations

from collections.abc import Set
from pathlib import Path
from typing import Any

from scaleup.cli.plot_axes import SIZE_LABEL, set_size_axis, size_ticks
from scaleup.units import format_bytes

__all__ = ["category_map", "heatmap", "line_plot"]


def _figure(width: float = 9.0, height: float = 4.5) -> Any:
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    figure = Figure(figsize=(width, height), dpi=110, layout="constrained")
    FigureCanvasAgg(figure)
    return figure


def line_plot(path: Path, title: str, series: dict[str, dict[int, dict[str, Any]]]) -> Any:
    """busbw (linear) and time (log) against size; one line per series (label -> size -> row).

    Sizes of 0 bytes (nccl-tests' count rule rounds tiny sizes down) have no place on a log
    axis and are left out. Returns the Figure (also written to ``path``).
    """
    figure = _figure()
    bw, tm = figure.subplots(1, 2)
    sizes: list[int] = []
    for label, by_size in series.items():
        xs = sorted(x for x in by_size if x > 0)
        if not xs:
            continue
        sizes.extend(xs)
        bw.plot(
            xs, [by_size[x]["busbw_gb_per_s"] for x in xs], marker="o", markersize=3, label=label
        )
        tm.plot(xs, [by_size[x]["time_us"] for x in xs], marker="o", markersize=3, label=label)
    for axis in (bw, tm):
        set_size_axis(axis, sizes)
        axis.grid(True, which="major", alpha=0.3)
    bw.set_ylabel("bus bandwidth (GB/s per direction)")
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
    return figure


def category_map(path: Path, title: str, grid: dict[str, dict[int, str]]) -> Any:
    """One row per series, one cell per size, coloured by the category (algorithm/protocol)."""
    from matplotlib.colors import ListedColormap
    from matplotlib.patches import Patch

    labels = sorted({v for row in grid.values() for v in row.values()})
    sizes = sorted({s for row in grid.values() for s in row if s > 0})
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
    shown = set(size_ticks(sizes[0], sizes[-1])) if sizes else set()
    at = [i for i, size in enumerate(sizes) if size in shown] or list(range(len(sizes)))[:1]
    axis.set_xticks(at, [format_bytes(sizes[i]) for i in at])
    axis.set_xlabel(SIZE_LABEL)
    axis.set_yticks(range(len(names)))
    axis.set_yticklabels(names)
    axis.set_ylabel("topology (series)")
    handles = [Patch(color=cmap(code[label]), label=label) for label in labels]
    figure.legend(
        handles=handles, title="algorithm/protocol", fontsize=7, loc="outside right upper"
    )
    figure.suptitle(title)
    figure.savefig(path)
    return figure


def heatmap(
    path: Path,
    title: str,
    rows: list[str],
    cols: list[Any],
    values: dict[tuple[str, Any], float],
    cbar_label: str,
    fmt: str,
    cmap: str,
    *,
    infeasible: Set[tuple[str, Any]] = frozenset(),
) -> Any:
    """Rows x tp columns, each cell annotated; a fraction-of-HBM map is centred on 1.0 (full).

    Cells in ``infeasible`` (configurations that do not fit in memory) are hatched and their
    value struck with an "x"; the legend says "does not fit". Returns the Figure.
    """
    matrix = [[values.get((r, c), float("nan")) for c in cols] for r in rows]
    figure = _figure(max(5.0, 1.2 * len(cols) + 3), 1.6 + 0.5 * len(rows))
    axis = figure.subplots()
    norm = None
    known = [v for v in values.values() if v == v]
    if "HBM" in cbar_label and known and min(known) < 1.0 < max(known):
        from matplotlib.colors import TwoSlopeNorm

        norm = TwoSlopeNorm(vmin=min(known), vcenter=1.0, vmax=max(known))  # 1.0 = HBM full
    image = axis.imshow(matrix, aspect="auto", cmap=cmap, norm=norm, interpolation="nearest")
    axis.set_xticks(range(len(cols)), [str(c) for c in cols])
    axis.set_xlabel("tensor-parallel size (accelerators per group)")
    axis.set_yticks(range(len(rows)), rows)
    axis.set_ylabel("configuration")
    for i, row in enumerate(matrix):
        for j, value in enumerate(row):
            if value == value:  # not NaN
                box = {"boxstyle": "round,pad=0.15", "fc": "white", "ec": "none", "alpha": 0.8}
                axis.text(j, i, format(value, fmt), ha="center", va="center", fontsize=7, bbox=box)
    _hatch(axis, [(cols.index(c), rows.index(r)) for r, c in infeasible if r in rows and c in cols])
    figure.colorbar(image, ax=axis, label=cbar_label)
    figure.suptitle(title)
    figure.savefig(path)
    return figure


def _hatch(axis: Any, cells: list[tuple[int, int]]) -> None:
    """Hatch the cells (column, row) and add a "does not fit" legend entry."""
    from matplotlib.patches import Rectangle

    if not cells:
        return
    for j, i in cells:
        axis.add_patch(
            Rectangle(
                (j - 0.5, i - 0.5),
                1,
                1,
                fill=False,
                hatch="xx",
                edgecolor="#444444",
                linewidth=0,
                alpha=0.6,
            )
        )
    key = Rectangle((0, 0), 1, 1, fill=False, hatch="xx", edgecolor="#444444", label="does not fit")
    axis.legend(
        handles=[key], loc="upper left", bbox_to_anchor=(0.0, -0.25), fontsize=7, frameon=False
    )
