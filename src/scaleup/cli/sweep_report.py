"""Sweep reports: PNG plots and an index page (Markdown, and self-contained HTML) from results.

:func:`build_report` reads a results file (:mod:`scaleup.sweep.store`) and writes into a
directory:

- ``busbw_<collective>.png``: busbw (GB/s) and time (µs) against message size, one line per
  topology (the best algorithm at each size);
- ``algos_<collective>_<topology>.png``: the same per algorithm/protocol, where a spec swept them;
- ``best_algo_<collective>.png``: which algorithm/protocol wins at each size, per topology
  (a categorical map);
- ``plan_<metric>_<model>.png``: planner points as heatmaps over tp × (topology, other axes):
  memory per accelerator against its HBM, and step time;
- ``index.md`` (images linked) and ``index.html`` (images embedded as base64 data URIs, so the
  one file can be mailed), with summary, peak-bandwidth, best-algorithm and error tables.

Plots use matplotlib's Agg canvas directly (no pyplot, no global backend switch), in
:mod:`scaleup.cli.sweep_plots`; the pages are :mod:`scaleup.cli.sweep_pages`. Rendering lives in
``cli/``: the library (:mod:`scaleup.sweep`) only produces the rows.
"""

from __future__ import annotations

import os
from collections import defaultdict
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from scaleup import __version__
from scaleup.cli.plot_axes import human_label
from scaleup.cli.sweep_pages import Table, about_lines, html_page, markdown_page, slug
from scaleup.cli.sweep_plan import plan_section
from scaleup.cli.sweep_plots import category_map, line_plot
from scaleup.errors import UsageError
from scaleup.sweep import read_provenance, read_rows
from scaleup.units import format_bytes

__all__ = ["ReportSummary", "build_report"]


@dataclass(frozen=True)
class ReportSummary:
    """What a report wrote: its directory, the PNG names, the index files, point counts."""

    out_dir: str
    images: list[str] = field(default_factory=list)
    index_md: str = ""
    index_html: str = ""
    points: int = 0
    errors: int = 0

    def to_dict(self) -> dict[str, Any]:
        """The summary as a plain dict (the ``--json`` form)."""
        return asdict(self)


def _series_label(row: dict[str, Any], multi_ranks: bool, multi_dtype: bool) -> str:
    label = human_label(row.get("topology"), "topology?")
    if multi_ranks:
        label += f" n={human_label(row.get('nranks'))}"
    if multi_dtype:
        label += f" {human_label(row.get('dtype'))}"
    return label


def _algo_label(row: dict[str, Any]) -> str:
    """The algorithm/protocol that ran (the tuner's choice for a "tuned" point)."""
    algo, proto = row.get("algo"), row.get("proto")
    return human_label(algo) + (f"/{proto}" if proto else "")


def _requested_label(row: dict[str, Any]) -> str:
    """The algorithm/protocol the spec asked for, in words where the tuner chose."""
    algo = row.get("requested_algo") or row.get("algo")
    proto = row.get("requested_proto") or row.get("proto")
    if algo in (None, "tuned"):
        return "tuner's choice" if proto in (None, "tuned") else f"tuner's algorithm, {proto}"
    return f"{algo} (best protocol)" if proto in (None, "tuned") else f"{algo}/{proto}"


#: Rows of one series by message size (bytes -> row).
_BySize = dict[int, dict[str, Any]]
#: Columns of the peak-bandwidth table.
_PEAK_COLUMNS = (
    "collective",
    "topology",
    "peak busbw (GB/s)",
    "at size",
    "algorithm",
    "time at largest (µs)",
    "largest size",
)


def _bench_section(rows: list[dict[str, Any]], out: Path) -> tuple[list[str], list[Table]]:
    """Plot every collective of the bench rows; the peak-bandwidth and fastest-algorithm tables."""
    images: list[str] = []
    multi_ranks = len({r.get("nranks") for r in rows}) > 1
    multi_dtype = len({r.get("dtype") for r in rows}) > 1
    peak_rows: list[list[str]] = []
    best_rows: list[list[str]] = []
    for collective in sorted({r["collective"] for r in rows}):
        subset = [r for r in rows if r["collective"] == collective]
        best, per_algo = _series_by_size(subset, multi_ranks, multi_dtype)
        images += _collective_plots(collective, best, per_algo, out)
        for label, by in best.items():
            peak_rows.append(_peak_row(collective, label, by))
            best_rows.append(_fastest_row(collective, label, by))
    tables: list[Table] = [
        ("Peak bus bandwidth", list(_PEAK_COLUMNS), peak_rows),
        ("Fastest algorithm by size", ["collective", "topology", "fastest"], best_rows),
    ]
    return images, tables


def _series_by_size(
    rows: list[dict[str, Any]], multi_ranks: bool, multi_dtype: bool
) -> tuple[dict[str, _BySize], dict[str, dict[str, _BySize]]]:
    """Per series: the highest-busbw row at each size, and each requested algorithm's rows."""
    best: dict[str, _BySize] = defaultdict(dict)
    per_algo: dict[str, dict[str, _BySize]] = defaultdict(lambda: defaultdict(dict))
    for r in rows:
        label, size = _series_label(r, multi_ranks, multi_dtype), int(r["bytes"])
        if size not in best[label] or r["busbw_gb_per_s"] > best[label][size]["busbw_gb_per_s"]:
            best[label][size] = r
        per_algo[label][_requested_label(r)][size] = r
    return best, per_algo


def _collective_plots(
    collective: str, best: dict[str, _BySize], per_algo: dict[str, dict[str, _BySize]], out: Path
) -> list[str]:
    """Write one collective's PNGs (best busbw, per algorithm where swept, fastest map)."""
    images: list[str] = []
    name = f"busbw_{slug(collective)}.png"
    title = f"{collective}: bus bandwidth and time by message size (best algorithm)"
    line_plot(out / name, title, best)
    images.append(name)
    for label, algos in per_algo.items():
        if len(algos) > 1:
            name = f"algos_{slug(collective)}_{slug(label)}.png"
            line_plot(out / name, f"{collective} on {label}: by algorithm/protocol", dict(algos))
            images.append(name)
    grid = {label: {s: _algo_label(r) for s, r in by.items()} for label, by in best.items()}
    name = f"best_algo_{slug(collective)}.png"
    category_map(out / name, f"{collective}: fastest algorithm/protocol by message size", grid)
    images.append(name)
    return images


def _peak_row(collective: str, label: str, by: _BySize) -> list[str]:
    """A series' peak busbw (size, algorithm) and its time at the largest size, as a table row."""
    top = max(by.values(), key=lambda r: r["busbw_gb_per_s"])
    largest = by[max(by)]
    return [
        collective,
        label,
        f"{top['busbw_gb_per_s']:.1f}",
        format_bytes(int(top["bytes"])),
        _algo_label(top),
        f"{largest['time_us']:.1f}",
        format_bytes(int(largest["bytes"])),
    ]


def _fastest_row(collective: str, label: str, by: _BySize) -> list[str]:
    """A series' fastest algorithm by size, as the sizes where it changes, as a table row."""
    changes, previous = [], None
    for size in sorted(by):
        algo = _algo_label(by[size])
        if algo != previous:
            changes.append(f"{algo} from {format_bytes(size)}")
            previous = algo
    return [collective, label, "; ".join(changes)]


def build_report(
    results: str | Path,
    out_dir: str | Path,
    *,
    title: str | None = None,
    progress: Callable[[str], None] | None = None,
) -> ReportSummary:
    """Write PNG plots and ``index.md`` / ``index.html`` for the results at ``results``.

    Parameters
    ----------
    results
        A sweep's output (Parquet dataset directory, Parquet file or CSV).
    out_dir
        Directory to write into (created).
    title
        Page title (default: the results file's name).
    progress
        Called with the name of each step as it starts (reading, each section's plots, pages).

    Returns
    -------
    ReportSummary

    Raises
    ------
    UsageError
        ``results`` holds no sweep results (or a damaged part), or ``out_dir`` is not a
        directory that can be written.
    """
    say = progress or (lambda _step: None)
    out = Path(out_dir)
    _writable_directory(out)
    say(f"reading {results}")
    rows = read_rows(results)
    if not rows:
        raise UsageError("holds no sweep results", source=str(results))
    if not {"point_id", "status"} <= set(rows[0]):
        raise UsageError(
            "not a sweep's results (no point_id and status columns)", source=str(results)
        )
    try:
        return _write_report(rows, results, out, title, say)
    except OSError as error:
        raise UsageError(
            f"cannot write the report: {error.strerror or error}", source=str(out)
        ) from None


def _writable_directory(out: Path) -> None:
    """Create ``out`` if needed; refuse a file, a device, or a place that cannot be written."""
    if os.path.lexists(out) and not out.is_dir():
        raise UsageError("is not a directory; a report is a directory of files", source=str(out))
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise UsageError(f"cannot create: {error.strerror or error}", source=str(out)) from None
    if not os.access(out, os.W_OK | os.X_OK):
        raise UsageError("cannot write into it (permission denied)", source=str(out))


def _write_report(
    rows: list[dict[str, Any]],
    results: str | Path,
    out: Path,
    title: str | None,
    say: Callable[[str], None],
) -> ReportSummary:
    ok = [r for r in rows if r.get("status") == "ok"]
    errors = [r for r in rows if r.get("status") != "ok"]
    images: list[str] = []
    tables: list[Table] = []
    kinds = sorted({str(r.get("kind")) for r in rows})
    summary = [
        [
            k,
            str(sum(r.get("kind") == k for r in rows)),
            str(sum(r.get("kind") == k for r in ok)),
            str(sum(r.get("kind") == k for r in errors)),
        ]
        for k in kinds
    ]
    tables.append(("Points", ["kind", "points", "ok", "errors"], summary))
    bench = [r for r in ok if r.get("kind") == "bench" and r.get("busbw_gb_per_s") is not None]
    if bench:
        say(f"plotting {len(bench)} bench points")
        more_images, more_tables = _bench_section(bench, out)
        images += more_images
        tables += more_tables
    plans = [r for r in ok if r.get("kind") == "plan"]
    if plans:
        say(f"plotting {len(plans)} plan points")
        more_images, more_tables = plan_section(plans, out)
        images += more_images
        tables += more_tables
    if errors:
        error_rows = [
            [_describe_point(r), str(r.get("error_type")), str(r.get("error"))] for r in errors[:50]
        ]
        tables.append(
            (
                f"Errors ({len(errors)} points{', first 50' if len(errors) > 50 else ''})",
                ["point", "type", "error"],
                error_rows,
            )
        )
    title = title or f"Sweep report: {Path(results).name}"
    say("writing index.md and index.html")
    index_md = out / "index.md"
    about = about_lines(str(results), read_provenance(results), __version__)
    index_md.write_text(markdown_page(title, images, tables, about), encoding="utf-8")
    index_html = out / "index.html"
    index_html.write_text(html_page(title, out, images, tables, about), encoding="utf-8")
    return ReportSummary(str(out), images, str(index_md), str(index_html), len(rows), len(errors))


def _describe_point(row: dict[str, Any]) -> str:
    import json

    try:
        point = json.loads(row.get("point") or "{}")
    except ValueError:
        return str(row.get("point_id"))
    return " ".join(f"{k}={v}" for k, v in point.items() if k != "kind") or str(row.get("point_id"))
