"""The planner section of a sweep report: memory and step-time heatmaps, and the plans table.

Cells of configurations that do not fit in memory are hatched (and said so in the legend), from
the planner's ``fits`` column, or from a memory fraction above 1 where no such column is.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from scaleup.cli.sweep_pages import Table, slug
from scaleup.cli.sweep_plots import heatmap

__all__ = ["PLAN_MEMORY_COLUMNS", "PLAN_STEP_COLUMNS", "plan_section"]

#: Plan-result columns tried, in order, for the two planner maps (the planner's own names first).
PLAN_MEMORY_COLUMNS = (
    "memory_fraction",
    "memory.fraction_of_hbm",
    "memory_per_device_bytes",
    "memory.total_bytes",
)
PLAN_STEP_COLUMNS = ("step_time_s", "step.time_s", "step.step_time_s", "time_s")
#: Axes of a plan point that are not shown as heatmap columns/rows labels.
_PLAN_SKIP = {
    "kind",
    "point",
    "point_id",
    "status",
    "error",
    "error_type",
    "elapsed_s",
    "topology",
    "model",
}
_FITS_COLUMNS = ("fits", "memory.fits")


def _first_column(rows: list[dict[str, Any]], candidates: Sequence[str], needle: str) -> str | None:
    keys = [k for k in rows[0] if any(isinstance(r.get(k), (int, float)) for r in rows)]
    for name in candidates:
        if name in keys:
            return name
    return next((k for k in keys if needle in k and not k.startswith("requested_")), None)


def _fits(row: dict[str, Any], memory: str | None) -> bool:
    """Whether the configuration fits in memory (unknown counts as fitting)."""
    for column in _FITS_COLUMNS:
        if isinstance(row.get(column), bool):
            return bool(row[column])
    value = row.get(memory) if memory and "fraction" in memory else None
    return not (isinstance(value, (int, float)) and value > 1.0)


def _describe(column: str, metric: str) -> tuple[str, str, float]:
    """(what the title says, the colour bar's label with its unit, the scale of the values)."""
    if metric == "step":
        return "training step time (s)", "step time (s)", 1.0
    if "fraction" in column:
        return "memory per accelerator, as a fraction of its HBM", "memory / HBM (1 = full)", 1.0
    if column.endswith("_bytes"):
        return "memory per accelerator (GB)", "memory per accelerator (GB)", 1e-9
    return f"memory per accelerator ({column})", column, 1.0


def plan_section(rows: list[dict[str, Any]], out: Path) -> tuple[list[str], list[Table]]:
    """Plot the planner points of every model; the plans table."""
    images: list[str] = []
    memory = _first_column(rows, PLAN_MEMORY_COLUMNS, "memory")
    step = _first_column(rows, PLAN_STEP_COLUMNS, "time_s")
    point_axes = sorted({k for r in rows for k in _point_keys(r)} - _PLAN_SKIP - {"tp"})
    varying = [a for a in point_axes if len({str(r.get(a)) for r in rows}) > 1]
    table_rows: list[list[str]] = []
    for model in sorted({str(r.get("model")) for r in rows}):
        subset = [r for r in rows if str(r.get("model")) == model]
        labels = {
            id(r): " ".join([str(r.get("topology"))] + [f"{a}={r.get(a)}" for a in varying])
            for r in subset
        }
        for column, metric in ((memory, "memory"), (step, "step")):
            if column is not None:
                images.append(_plan_map(out, model, subset, labels, column, metric, memory))
        for r in subset:
            fits = "" if _fits(r, memory) else " (does not fit)"
            table_rows.append(
                [
                    model,
                    labels[id(r)] + fits,
                    str(r.get("tp", "")),
                    _fmt(r.get(memory)) if memory else "",
                    _fmt(r.get(step)) if step else "",
                ]
            )
    table = (
        "Plans",
        ["model", "configuration", "tp", memory or "memory", step or "step time"],
        table_rows,
    )
    return images, [table]


def _plan_map(
    out: Path,
    model: str,
    subset: list[dict[str, Any]],
    labels: dict[int, str],
    column: str,
    metric: str,
    memory: str | None,
) -> str:
    """Draw one heatmap (memory or step time over tp x configuration); its file name."""
    what, bar, scale = _describe(column, metric)
    row_names = list(dict.fromkeys(labels[id(r)] for r in subset))
    cols = sorted({r.get("tp", 1) for r in subset}, key=lambda v: (str(type(v)), v))
    values = {
        (labels[id(r)], r.get("tp", 1)): float(r[column]) * scale
        for r in subset
        if r.get(column) is not None
    }
    infeasible = {(labels[id(r)], r.get("tp", 1)) for r in subset if not _fits(r, memory)}
    name = f"plan_{metric}_{slug(model)}.png"
    fmt, cmap = (".2g", "RdYlGn_r") if metric == "memory" else (".3g", "viridis")
    heatmap(
        out / name,
        f"{model}: {what}",
        row_names,
        cols,
        values,
        bar,
        fmt,
        cmap,
        infeasible=infeasible,
    )
    return name


def _point_keys(row: dict[str, Any]) -> list[str]:
    try:
        return list(json.loads(row.get("point") or "{}"))
    except ValueError:
        return []


def _fmt(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    return "" if value is None else str(value)
