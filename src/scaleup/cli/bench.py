"""``scaleup bench``: nccl-tests for machines you don't have (and, with ``--runtime``, for real).

With no flags it prints what ``all_reduce_perf -b 8 -e 8G -f 2 -g 8`` prints on a DGX H100,
simulated: nccl-tests' header, its columns (size, count, type, redop, root, time, algbw, busbw)
plus the tuner's algo, proto and channels and ``linkbw`` (busiest channel), and its footer
``# Avg bus bandwidth``. ``--topology a,b`` compares fabrics side by side in one table.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import typer

from scaleup.cli import render
from scaleup.collectives.spec import COLLECTIVES, REDOPS
from scaleup.errors import UsageError
from scaleup.report import BenchRow
from scaleup.units import parse_size

__all__ = ["bench_cmd", "register", "split_topologies"]

_PROTOCOLS = ("ll", "ll128", "simple")
_RUNTIMES = ("shm", "pipe", "mpi")


def split_topologies(text: str) -> list[str]:
    """Split ``--topology a,b`` on commas, keeping ``name:k=v,k2=v2`` parameters together.

    >>> split_topologies("dgx-h100,ualink-pod:n=64,planes=8,pcie-8")
    ['dgx-h100', 'ualink-pod:n=64,planes=8', 'pcie-8']
    """
    out: list[str] = []
    for piece in (p.strip() for p in text.split(",")):
        if not piece:
            continue
        if out and ":" in out[-1] and re.match(r"^[A-Za-z_]\w*=", piece):
            out[-1] += "," + piece
        else:
            out.append(piece)
    if not out:
        raise UsageError("--topology is empty", source="--topology")
    return out


def _fmt_time(us: float) -> str:
    """nccl-tests' time format: 2 decimals below 100 us, 1 below 10 ms, none above."""
    if us >= 10_000:
        return f"{us:.0f}"
    if us >= 100:
        return f"{us:.1f}"
    return f"{us:.2f}"


def _fmt_bw(gb_per_s: float | None) -> str:
    return "" if gb_per_s is None else f"{gb_per_s:.2f}"


def _header_lines(label: str, topo: Any, rows: list[BenchRow], args: dict[str, Any]) -> list[str]:
    from scaleup.topology import analysis

    accs = topo.accelerators[: rows[0].nranks] if rows else topo.accelerators
    types = sorted({a.type for a in accs})
    per_gpu = analysis.per_accelerator_gb_per_s(topo)
    lines = [
        f"# scaleup bench (simulated) {label}: {args['op']} minBytes {args['min_bytes']} "
        f"maxBytes {args['max_bytes']} step: {args['factor']:g}(factor) dtype {args['dtype']}",
        f"# Topology {topo.name}: {len(accs)} x {'/'.join(types)}, {len(topo.switches)} switches, "
        f"{len(topo.nodes)} server(s), {per_gpu:.1f} GB/s per GPU per direction, "
        f"peer access {'on' if topo.peer_access else 'off (host-staged)'}",
        "#",
        "# Using devices",
    ]
    if len(accs) <= 16:
        lines += [
            f"#  Rank {r:2d} device {a.id} node {a.node} {a.type}" for r, a in enumerate(accs)
        ]
    else:
        lines.append(
            f"#  Ranks 0..{len(accs) - 1}: devices {accs[0].id} .. {accs[-1].id} ({len(accs)} x {'/'.join(types)})"
        )
    return lines


#: nccl-tests' type column names.
_NCCL_TYPE = {
    "float32": "float",
    "float": "float",
    "float16": "half",
    "half": "half",
    "float64": "double",
    "double": "double",
    "bfloat16": "bfloat16",
}
_W_TIME, _W_BW = 9, 8


def _line(cells: list[tuple[str, int]]) -> str:
    return " ".join(text.rjust(width) for text, width in cells)


def _common_cells(r: BenchRow, with_count: bool) -> list[tuple[str, int]]:
    cells = [(str(r.bytes), 12)]
    if with_count:
        cells.append((str(r.count), 12))
    return cells + [(_NCCL_TYPE.get(r.dtype, r.dtype), 8), (r.redop, 6), (str(r.root), 5)]


def _sim_cells(
    r: BenchRow, *, with_count: bool = False, compact: bool = False
) -> list[tuple[str, int]]:
    cells = [(str(r.count), 12)] if with_count else []
    cells += [(_fmt_time(r.time_us), _W_TIME)]
    if not compact:
        cells.append((_fmt_bw(r.algbw_gb_per_s), _W_BW))
    cells += [(_fmt_bw(r.busbw_gb_per_s), _W_BW), (_fmt_bw(r.linkbw_gb_per_s), _W_BW)]
    if compact:
        return [*cells, (f"{r.algo}/{r.proto}/{r.channels}", 20)]
    return [*cells, (r.algo, 12), (r.proto, 6), (str(r.channels), 8)]


def _table_lines(series: dict[str, list[BenchRow]]) -> list[str]:
    """nccl-tests' plain-text table (fixed-width columns, '#' header lines), so nothing truncates."""
    labels = list(series)
    first = series[labels[0]]
    head = [("size", 12), ("count", 12), ("type", 8), ("redop", 6), ("root", 5)]
    units = [("(B)", 12), ("(elements)", 12), ("", 8), ("", 6), ("", 5)]
    per = [
        ("time", _W_TIME),
        ("algbw", _W_BW),
        ("busbw", _W_BW),
        ("linkbw", _W_BW),
        ("algo", 12),
        ("proto", 6),
        ("channels", 8),
    ]
    per_units = [
        ("(us)", _W_TIME),
        ("(GB/s)", _W_BW),
        ("(GB/s)", _W_BW),
        ("(GB/s)", _W_BW),
        ("", 12),
        ("", 6),
        ("", 8),
    ]
    if len(labels) == 1:
        lines = ["#" + _line(head + per)[1:], "#" + _line(units + per_units)[1:]]
        return lines + [_line(_common_cells(r, True) + _sim_cells(r)) for r in first]
    same_count = all([r.count for r in s] == [r.count for r in first] for s in series.values())
    if not same_count:
        head, units = [head[0], *head[2:]], [units[0], *units[2:]]
    group = ([] if same_count else [("count", 12)]) + [
        ("time", _W_TIME),
        ("busbw", _W_BW),
        ("linkbw", _W_BW),
        ("algo/proto/ch", 20),
    ]
    group_units = ([] if same_count else [("(elements)", 12)]) + [
        ("(us)", _W_TIME),
        ("(GB/s)", _W_BW),
        ("(GB/s)", _W_BW),
        ("", 20),
    ]
    width = len(_line(group))
    lines = [
        "#" + " " * len(_line(head)) + "".join(" " + lab[:width].center(width) for lab in labels)
    ]
    lines.append("#" + _line(head + group * len(labels))[1:])
    lines.append("#" + _line(units + group_units * len(labels))[1:])
    for i, r0 in enumerate(first):
        cells = _common_cells(r0, same_count)
        for label in labels:
            rows = series[label]
            if i < len(rows):
                cells += _sim_cells(rows[i], with_count=not same_count, compact=True)
        lines.append(_line(cells))
    return lines


def _echo(line: str) -> None:
    render.console.print(line, markup=False, highlight=False)


def _progress_runner(total_topologies: int) -> Any:
    """A rich progress bar on stderr when it is a terminal, else None."""
    if not sys.stderr.isatty():
        return None
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

    return Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        console=render.err_console,
        transient=True,
    )


def _simulate_all(
    labels: list[str], topologies: list[Any], kwargs: dict[str, Any]
) -> dict[str, list[BenchRow]]:
    from scaleup.bench import bench_rows

    bar = _progress_runner(len(labels))
    series: dict[str, list[BenchRow]] = {}
    if bar is None:
        for label, topo in zip(labels, topologies, strict=True):
            series[label] = bench_rows(topo, **kwargs)
        return series
    with bar:
        for label, topo in zip(labels, topologies, strict=True):
            task = bar.add_task(f"bench {label}", total=None)
            update: Callable[[int, int], None] = lambda done, total, t=task: bar.update(
                t, completed=done, total=total
            )  # noqa: E731
            series[label] = bench_rows(topo, progress=update, **kwargs)
    return series


def _runtime_rows(
    runtime: str,
    nprocs: int,
    op: str,
    sizes_bytes: list[int],
    dtype: str,
    algo: str | None,
    iters: int | None,
    warmup: int | None,
) -> list[BenchRow]:
    try:
        from scaleup.runtime import measure  # noqa: PLC0415 - optional stream, imported lazily
    except ImportError as error:
        raise UsageError("runtime measurement not available", source="--runtime") from error
    fn = getattr(measure, "bench_rows", None)
    if fn is None:
        raise UsageError("runtime measurement not available", source="--runtime")
    return list(fn(runtime, nprocs, op, sizes_bytes, dtype, algo, iters, warmup))


def bench_cmd(
    min_bytes: str = typer.Option("8", "-b", "--minbytes", help="Smallest size (e.g. 8, 64K, 1M)."),
    max_bytes: str = typer.Option(
        "8G", "-e", "--maxbytes", help="Largest size (powers of 1024: 8G)."
    ),
    factor: float = typer.Option(
        2.0, "-f", "--stepfactor", help="Multiply the size by this (> 1)."
    ),
    op: str = typer.Option("all_reduce", "--op", help="Collective: " + "|".join(COLLECTIVES) + "."),
    dtype: str = typer.Option(
        "float32", "-d", "--dtype", help="Element type (float32, float16, int32, ...)."
    ),
    redop: str = typer.Option("sum", "-o", "--redop", help="Reduction: " + "|".join(REDOPS) + "."),
    root: int = typer.Option(0, "-r", "--root", help="Root rank of broadcast and reduce."),
    ranks: int | None = typer.Option(None, "--ranks", help="Use the first N accelerators."),
    algo: str | None = typer.Option(
        None, "--algo", help="Force an algorithm (ring, tree, nvls, direct, ...)."
    ),
    proto: str | None = typer.Option(None, "--proto", help="Force a protocol: ll|ll128|simple."),
    channels: int | None = typer.Option(None, "--channels", help="Force a channel count."),
    tuner: str = typer.Option(
        "nccl",
        "--tuner",
        help="Algorithms the tuner picks from: nccl|all (adds direct, recursive).",
    ),
    no_p2p: bool = typer.Option(
        False, "--no-p2p", help="Peer access off: stage through host memory."
    ),
    topology: str = typer.Option(
        "dgx-h100", "--topology", help="Preset, Nx<preset>, file; a,b compares."
    ),
    json_out: bool = typer.Option(False, "--json", help="Print the rows as JSON."),
    csv_out: bool = typer.Option(False, "--csv", help="Print the rows as CSV."),
    plot: Path | None = typer.Option(
        None, "--plot", help="Also write busbw vs size to this image."
    ),
    runtime: str | None = typer.Option(None, "--runtime", help="Measure for real: shm|pipe|mpi."),
    nprocs: int | None = typer.Option(None, "-n", "--nprocs", help="Processes for --runtime."),
    iters: int | None = typer.Option(
        None, "--iters", help="Timed iterations per size (--runtime)."
    ),
    warmup: int | None = typer.Option(
        None, "--warmup", help="Warm-up iterations per size (--runtime)."
    ),
) -> None:
    """Print nccl-tests' table for a collective on a simulated fabric (default: dgx-h100)."""
    from scaleup.bench import sizes

    lo = parse_size(min_bytes, source="-b")
    hi = parse_size(max_bytes, source="-e")
    size_list = sizes(lo, hi, factor)
    if op not in COLLECTIVES:
        raise UsageError(f"unknown op {op!r}; known: {', '.join(COLLECTIVES)}", source="--op")
    if redop not in REDOPS:
        raise UsageError(f"unknown redop {redop!r}; known: {', '.join(REDOPS)}", source="-o")
    if proto is not None and proto not in _PROTOCOLS:
        raise UsageError(
            f"unknown protocol {proto!r}; known: {', '.join(_PROTOCOLS)}", source="--proto"
        )
    if tuner not in ("nccl", "all"):
        raise UsageError(f"unknown --tuner {tuner!r}; use nccl or all", source="--tuner")
    if json_out and csv_out:
        raise UsageError("choose one of --json and --csv", source="--json/--csv")
    args = {"op": op, "min_bytes": lo, "max_bytes": hi, "factor": factor, "dtype": dtype}

    if runtime is not None:
        if runtime not in _RUNTIMES:
            raise UsageError(
                f"unknown runtime {runtime!r}; known: {', '.join(_RUNTIMES)}", source="--runtime"
            )
        if nprocs is None or nprocs < 1:
            raise UsageError("--runtime needs -n N (N >= 1 processes)", source="-n")
        label = f"runtime-{runtime}"
        series = {label: _runtime_rows(runtime, nprocs, op, size_list, dtype, algo, iters, warmup)}
        topos: dict[str, Any] = {}
    else:
        if nprocs is not None or iters is not None or warmup is not None:
            raise UsageError("-n, --iters and --warmup need --runtime", source="-n")
        from scaleup.topology import resolve_topology

        labels = split_topologies(topology)
        topo_objs = [resolve_topology(t) for t in labels]
        if no_p2p:
            topo_objs = [t.with_peer_access(False) for t in topo_objs]
            labels = [f"{lab}:no-p2p" for lab in labels]
        if len(set(labels)) != len(labels):
            raise UsageError("--topology lists the same fabric twice", source="--topology")
        kwargs = {
            "collective": op,
            "min_bytes": lo,
            "max_bytes": hi,
            "factor": factor,
            "dtype": dtype,
            "redop": redop,
            "nranks": ranks,
            "algo": algo,
            "proto": proto,
            "root": root,
            "channels": channels,
            "family": tuner,
        }
        series = _simulate_all(labels, topo_objs, kwargs)
        topos = dict(zip(labels, topo_objs, strict=True))

    if plot is not None:
        from scaleup.cli.bench_plot import plot_busbw

        plot_busbw(series, plot)
    all_rows = [r for rows in series.values() for r in rows]
    if json_out:
        render.print_json([_json_row(r) for r in all_rows])
        return
    if csv_out:
        render.print_csv([_json_row(r) for r in all_rows])
        return
    for label, rows in series.items():
        if label in topos:
            for line in _header_lines(label, topos[label], rows, args):
                _echo(line)
        else:
            _echo(
                f"# scaleup bench --runtime {label.split('-', 1)[1]}: {op} {len(rows)} sizes, "
                f"{rows[0].nranks if rows else nprocs} processes (measured)"
            )
    for line in _table_lines(series):
        _echo(line)
    for label, rows in series.items():
        avg = sum(r.busbw_gb_per_s for r in rows) / len(rows) if rows else 0.0
        suffix = f" ({label})" if len(series) > 1 else ""
        _echo(f"# Avg bus bandwidth    : {avg:g}{suffix}")
    if plot is not None:
        _echo(f"# plot written to {plot}")


def _json_row(r: BenchRow) -> dict[str, Any]:
    return r.to_dict()


def register(app: typer.Typer) -> None:
    """Add the ``bench`` command to the scaleup app."""
    app.command("bench")(bench_cmd)
