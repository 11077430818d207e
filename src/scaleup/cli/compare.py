"""``scaleup compare TOPO TOPO ...``: fabrics side by side, one column each.

The rows: accelerators and scale-up domain, scale-up bandwidth per accelerator, pooled HBM,
bisection, busbw of each collective at each size (what ``scaleup bench`` prints for that fabric
and size) and a tensor-parallel training step of a catalog model (``scaleup plan``'s numbers).
The computation is :func:`scaleup.compare.compare`; this module renders it as a rich table,
``--json``, ``--csv`` or a self-contained ``--html`` page with busbw plots.
"""

from __future__ import annotations

import datetime
import io
import shlex
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from scaleup.cli import render
from scaleup.compare import DEFAULT_MODEL, DEFAULT_SIZES, FabricRow, ModelCell
from scaleup.errors import UsageError
from scaleup.units import GB, format_bytes, parse_size

if TYPE_CHECKING:
    from scaleup.topology import Topology

__all__ = ["compare_cmd", "html_report", "register", "table_cells"]


def _model_text(cell: ModelCell, with_tp: bool) -> tuple[str, str]:
    """(step cell, communication-share cell) of the model row."""
    if cell.skipped is not None:
        return f"cannot run: {cell.skipped}", "-"
    step = f"{cell.step_time_s or 0.0:,.3f} s" + (f" (TP {cell.tp})" if with_tp else "")
    if not cell.fits:
        need, have = cell.memory_per_device_bytes / GB, cell.hbm_per_device_bytes / GB
        step = f"does not fit ({need:,.1f} GB/dev of {have:,.1f}); {step}"
    return step, f"{100 * (cell.comm_share or 0.0):.1f}%"


def table_cells(rows: list[FabricRow]) -> tuple[list[str], list[list[str]]]:
    """The side-by-side table: a header (``""`` then one label per fabric) and rows of cells."""
    header = ["", *(r.label for r in rows)]
    body: list[list[str]] = [
        ["accelerators (domain)", *(_accelerators(r) for r in rows)],
        ["scale-up GB/s per accelerator", *(f"{r.per_accelerator_gb_per_s:,.0f}" for r in rows)],
        ["pooled HBM GB", *(f"{r.pooled_memory_bytes / GB:,.0f}" for r in rows)],
        ["bisection GB/s", *(_bisection(r) for r in rows)],
    ]
    first = rows[0]
    for op in first.busbw:
        for size in first.sizes_bytes:
            body.append(
                [
                    f"{op} busbw {format_bytes(size)} GB/s",
                    *(f"{r.busbw_gb_per_s(op, size):,.1f}" for r in rows),
                ]
            )
    cells = [r.model for r in rows if r.model is not None]
    if cells:
        tps = {c.tp for c in cells}
        per_cell = len(tps) > 1  # TP in each cell when the fabrics got different ones
        texts = [_model_text(r.model, per_cell) if r.model else ("-", "-") for r in rows]
        label = f"{cells[0].model} step" + ("" if per_cell else f" (TP {tps.pop()})")
        body.append([label, *(t[0] for t in texts)])
        body.append(["exposed communication share", *(t[1] for t in texts)])
    return header, body


def _accelerators(r: FabricRow) -> str:
    return f"{r.accelerators} x {'+'.join(r.accelerator_types)} ({r.domain_size})"


def _bisection(r: FabricRow) -> str:
    return ("" if r.bisection_exact else "<= ") + f"{r.bisection_gb_per_s:,.0f}"


def _figures(rows: list[FabricRow]) -> list[tuple[str, bytes]]:
    """One PNG per collective: busbw vs size, one line per fabric."""
    from scaleup.cli.bench_plot import busbw_figure  # matplotlib only for --html

    out = []
    for op in rows[0].busbw:
        title = f"{op}: simulated bus bandwidth by message size"
        fig = busbw_figure({r.label: r.busbw[op] for r in rows}, title=title)
        buffer = io.BytesIO()
        fig.savefig(buffer, format="png")
        out.append((f"{op} busbw (GB/s per direction) vs message size", buffer.getvalue()))
    return out


def html_report(rows: list[FabricRow], command: str) -> str:
    """A self-contained HTML page: the table, busbw plots (base64 PNG) and what produced it."""
    from scaleup import __version__
    from scaleup.cli.sweep_pages import html_document

    now = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
    header, body = table_cells(rows)
    title = "scaleup compare: " + ", ".join(r.label for r in rows)
    about = ["Simulated collectives (nccl-tests busbw, GB/s = 1e9 B/s per direction)."]
    footer = [f"Produced by scaleup {__version__} on {now} with: {command}"]
    tables = [("fabrics side by side", header, body)]
    return html_document(title, _figures(rows), tables, about, footer)


_SIZES_OPTION = typer.Option(
    ",".join(format_bytes(s) for s in DEFAULT_SIZES),
    "--sizes",
    help="Comma-separated message sizes for busbw (powers of 1024: 1M, 64M, 1G).",
)
_MODEL_OPTION = typer.Option(
    DEFAULT_MODEL, "--model", "-m", help="Catalog model planned on each fabric."
)
_TP_OPTION = typer.Option(
    None, "--tp", help="Tensor-parallel size (default: the domain, at most 8); DP fills the rest."
)
_FAIL_LINK_OPTION = typer.Option(
    None, "--fail-link", help="Remove every link between A and B in each fabric (A-B); repeatable."
)
_DEGRADE_OPTION = typer.Option(
    None, "--degrade", help="Scale the links between A and B by F (A-B=F, 0 < F <= 1); repeatable."
)
_JSON_OPTION = typer.Option(False, "--json", help="Print JSON: one record per fabric.")
_CSV_OPTION = typer.Option(False, "--csv", help="Print CSV: one row per fabric.")
_HTML_OPTION = typer.Option(
    None, "--html", help="Also write a self-contained HTML page (table and busbw plots)."
)
_PROFILE_OPTION = typer.Option(
    None, "--profile", help="Apply a calibration profile (scaleup calibrate -o FILE) to each."
)


def compare_cmd(
    ctx: typer.Context,
    topologies: list[str] = typer.Argument(
        ..., metavar="TOPO...", help="Presets, Nx<preset>, name:key=value or files."
    ),
    sizes: str = _SIZES_OPTION,
    model: str = _MODEL_OPTION,
    tp: int | None = _TP_OPTION,
    json_out: bool = _JSON_OPTION,
    csv_out: bool = _CSV_OPTION,
    html: Path | None = _HTML_OPTION,
    profile: Path | None = _PROFILE_OPTION,
    fail_links: list[str] | None = _FAIL_LINK_OPTION,
    degrades: list[str] | None = _DEGRADE_OPTION,
) -> None:
    """Fabrics side by side: domain, bandwidth, pooled HBM, busbw, a model's step time."""
    from scaleup.calibrate.profile import load_profile
    from scaleup.compare import compare
    from scaleup.topology import resolve_topology
    from scaleup.topology.faults import apply_faults, parse_faults

    render.check_one_format(json_out, csv_out)
    calibration = None if profile is None else load_profile(profile)  # before any simulation
    texts = [s.strip() for s in sizes.split(",") if s.strip()]
    if not texts:
        raise UsageError("no size given", source="--sizes")
    sizes_bytes = tuple(parse_size(s, source="--sizes") for s in texts)
    if html is not None and not html.parent.is_dir():  # before minutes of simulation
        raise UsageError(f"no directory {str(html.parent)!r} for the page", source="--html")
    fabrics: list[Topology | str] = list(topologies)
    faults = parse_faults(fail_links, degrades)
    if faults:  # each fabric damaged; its label is then its name, +fail(A-B)...
        fabrics = [apply_faults(resolve_topology(t), faults) for t in topologies]
    with render.activity("compare") as step:
        rows = compare(
            fabrics, sizes_bytes=sizes_bytes, model=model, tp=tp, progress=step,
            profile=calibration,
        )  # fmt: skip
    if html is not None:
        command = shlex.join(["scaleup", *ctx.meta.get("scaleup.args", ["compare"])])
        try:
            html.write_text(html_report(rows, command), encoding="utf-8")
        except OSError as error:
            raise UsageError(f"cannot write the page: {error}", source="--html") from None
    _show(rows, json_out=json_out, csv_out=csv_out, html=html)


def _show(rows: list[FabricRow], *, json_out: bool, csv_out: bool, html: Path | None) -> None:
    if csv_out:
        render.print_csv([render.flatten(r.to_dict(detail=False)) for r in rows])
        return
    if json_out:
        render.print_json([r.to_dict() for r in rows])
        return
    header, body = table_cells(rows)
    render.print_table(header, body, title="fabrics side by side (busbw simulated, per direction)")
    if html is not None:
        render.console.print(f"wrote {html}")


def register(app: typer.Typer) -> None:
    """Add the ``compare`` command to the scaleup app."""
    app.command("compare")(compare_cmd)
