"""nccl-tests' plain-text table for ``scaleup bench``: header, fixed-width columns, footer.

The columns are nccl-tests' (size, count, type, redop, root, time, algbw, busbw) plus the
tuner's algo, proto and channels and ``linkbw`` (busiest channel). Several topologies share one
table, one column group each. Lines are returned, not printed: the command prints them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from scaleup.report import BenchRow
from scaleup.topology import analysis
from scaleup.topology.model import Topology

__all__ = ["SweepArgs", "footer_lines", "runtime_header", "sim_header", "table_lines"]

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
_Cells = list[tuple[str, int]]


@dataclass(frozen=True)
class SweepArgs:
    """What the header repeats of the command line: op, -b, -e, -f, -d."""

    op: str
    min_bytes: int
    max_bytes: int
    factor: float
    dtype: str


def _fmt_time(us: float) -> str:
    """nccl-tests' time format: 2 decimals below 100 us, 1 below 10 ms, none above."""
    if us >= 10_000:
        return f"{us:.0f}"
    if us >= 100:
        return f"{us:.1f}"
    return f"{us:.2f}"


def _fmt_bw(gb_per_s: float | None) -> str:
    return "" if gb_per_s is None else f"{gb_per_s:.2f}"


def sim_header(label: str, topo: Topology, rows: Sequence[BenchRow], args: SweepArgs) -> list[str]:
    """nccl-tests' header of a simulated series: the sweep, the fabric, the devices."""
    accs = topo.accelerators[: rows[0].nranks] if rows else topo.accelerators
    types = "/".join(sorted({a.type for a in accs}))
    per_gpu = analysis.per_accelerator_gb_per_s(topo)
    lines = [
        f"# scaleup bench (simulated) {label}: {args.op} minBytes {args.min_bytes} "
        f"maxBytes {args.max_bytes} step: {args.factor:g}(factor) dtype {args.dtype}",
        f"# Topology {topo.name}: {len(accs)} x {types}, {len(topo.switches)} switches, "
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
            f"#  Ranks 0..{len(accs) - 1}: devices {accs[0].id} .. {accs[-1].id} "
            f"({len(accs)} x {types})"
        )
    return lines


def runtime_header(transport: str, rows: Sequence[BenchRow], args: SweepArgs, nprocs: int) -> str:
    """The one header line of a measured series."""
    return (
        f"# scaleup bench --runtime {transport}: {args.op} {len(rows)} sizes, "
        f"{rows[0].nranks if rows else nprocs} processes (measured)"
    )


def _line(cells: _Cells) -> str:
    return " ".join(text.rjust(width) for text, width in cells)


def _common_cells(r: BenchRow, with_count: bool) -> _Cells:
    cells = [(str(r.bytes), 12)]
    if with_count:
        cells.append((str(r.count), 12))
    return cells + [(_NCCL_TYPE.get(r.dtype, r.dtype), 8), (r.redop, 6), (str(r.root), 5)]


def _sim_cells(r: BenchRow, *, with_count: bool = False, compact: bool = False) -> _Cells:
    cells = [(str(r.count), 12)] if with_count else []
    cells += [(_fmt_time(r.time_us), _W_TIME)]
    if not compact:
        cells.append((_fmt_bw(r.algbw_gb_per_s), _W_BW))
    cells += [(_fmt_bw(r.busbw_gb_per_s), _W_BW), (_fmt_bw(r.linkbw_gb_per_s), _W_BW)]
    if compact:
        return [*cells, (f"{r.algo}/{r.proto}/{r.channels}", 20)]
    return [*cells, (r.algo, 12), (r.proto, 6), (str(r.channels), 8)]


_HEAD = [("size", 12), ("count", 12), ("type", 8), ("redop", 6), ("root", 5)]
_UNITS = [("(B)", 12), ("(elements)", 12), ("", 8), ("", 6), ("", 5)]
_PER = [("time", _W_TIME), ("algbw", _W_BW), ("busbw", _W_BW), ("linkbw", _W_BW), ("algo", 12),
        ("proto", 6), ("channels", 8)]  # fmt: skip
_PER_UNITS = [("(us)", _W_TIME), ("(GB/s)", _W_BW), ("(GB/s)", _W_BW), ("(GB/s)", _W_BW),
              ("", 12), ("", 6), ("", 8)]  # fmt: skip
_GROUP = [("time", _W_TIME), ("busbw", _W_BW), ("linkbw", _W_BW), ("algo/proto/ch", 20)]
_GROUP_UNITS = [("(us)", _W_TIME), ("(GB/s)", _W_BW), ("(GB/s)", _W_BW), ("", 20)]


def table_lines(series: Mapping[str, Sequence[BenchRow]]) -> list[str]:
    """nccl-tests' plain-text table (fixed-width columns, '#' header lines), so nothing
    truncates; one column group per series when there are several."""
    labels = list(series)
    first = series[labels[0]]
    if len(labels) == 1:
        lines = ["#" + _line(_HEAD + _PER)[1:], "#" + _line(_UNITS + _PER_UNITS)[1:]]
        return lines + [_line(_common_cells(r, True) + _sim_cells(r)) for r in first]
    same_count = all([r.count for r in s] == [r.count for r in first] for s in series.values())
    shown = range(len(_HEAD)) if same_count else (0, 2, 3, 4)  # without the count column
    head, units = [_HEAD[i] for i in shown], [_UNITS[i] for i in shown]
    count = [] if same_count else [("count", 12)]
    group, group_units = count + _GROUP, ([("(elements)", 12)] if count else []) + _GROUP_UNITS
    width = len(_line(group))
    lines = [
        "#" + " " * len(_line(head)) + "".join(" " + lab[:width].center(width) for lab in labels),
        "#" + _line(head + group * len(labels))[1:],
        "#" + _line(units + group_units * len(labels))[1:],
    ]
    for i, r0 in enumerate(first):
        cells = _common_cells(r0, same_count)
        for label in labels:
            rows = series[label]
            if i < len(rows):
                cells += _sim_cells(rows[i], with_count=not same_count, compact=True)
        lines.append(_line(cells))
    return lines


def footer_lines(series: Mapping[str, Sequence[BenchRow]]) -> list[str]:
    """nccl-tests' ``# Avg bus bandwidth`` line, one per series."""
    lines = []
    for label, rows in series.items():
        avg = sum(r.busbw_gb_per_s for r in rows) / len(rows) if rows else 0.0
        suffix = f" ({label})" if len(series) > 1 else ""
        lines.append(f"# Avg bus bandwidth    : {avg:g}{suffix}")
    return lines
