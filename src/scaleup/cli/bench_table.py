"""nccl-tests' plain-text table for ``scaleup bench``: header, fixed-width columns, footer.

The columns are nccl-tests' 2.x, at its widths: size, count, type, redop, root, then time, algbw,
busbw and ``#wrong`` out of place and again in place (13 columns), then scaleup's ``linkbw``
(busiest channel) and the tuner's algo, proto and channels. A simulated row has one time for
both groups and nothing to check (``N/A``). The footer is nccl-tests' ``# Out of bounds values``
and ``# Avg bus bandwidth``. Several topologies share one table, one column block each. Lines
are returned, not printed: the command prints them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from scaleup.report import BenchRow

if TYPE_CHECKING:
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
_Cells3 = list[tuple[str, int, int]]  # (text, gap before, width)


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
    from scaleup.topology import analysis

    accs = topo.accelerators[: rows[0].nranks] if rows else topo.accelerators
    types = "/".join(sorted({a.type for a in accs}))
    per_gpu = analysis.per_accelerator_gb_per_s(topo)
    lines = [
        f"# scaleup bench (simulated) {label}: {args.op} minBytes {args.min_bytes} "
        f"maxBytes {args.max_bytes} step: {args.factor:g}(factor) dtype {args.dtype}",
        f"# Topology {topo.name}: {len(accs)} x {types}, {len(topo.switches)} switches, "
        f"{len(topo.nodes)} server(s), {per_gpu:.1f} GB/s per GPU per direction, "
        f"peer access {'on' if topo.peer_access else 'off (host-staged)'}",
    ]
    if topo.calibration is not None:
        lines.append(f"# Calibrated: {topo.calibration.describe()} (--profile)")
    lines += ["#", "# Using devices"]
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


def _join(cells: _Cells3) -> str:
    return "".join(" " * gap + text.rjust(width) for text, gap, width in cells)


def _head(cells: _Cells3) -> str:
    """A header line: the cells with '#' over the first character, as nccl-tests prints."""
    return "#" + _join(cells)[1:]


def _cells(texts: Sequence[str], cols: Sequence[tuple[int, int]]) -> _Cells3:
    return [(t, gap, width) for t, (gap, width) in zip(texts, cols, strict=True)]


def _prefix(r: BenchRow, with_count: bool) -> list[str]:
    count = [str(r.count)] if with_count else []
    return [str(r.bytes), *count, _NCCL_TYPE.get(r.dtype, r.dtype), r.redop, str(r.root)]


def _wrong(count: int | None) -> str:
    return "N/A" if count is None else str(count)


def _groups(r: BenchRow) -> list[str]:
    """nccl-tests' out-of-place and in-place groups: time, algbw, busbw, #wrong each."""
    ip_alg, ip_bus = r.in_place_bw()
    return [
        _fmt_time(r.time_us), _fmt_bw(r.algbw_gb_per_s), _fmt_bw(r.busbw_gb_per_s),
        _wrong(r.wrong), _fmt_time(r.in_place_us), _fmt_bw(ip_alg), _fmt_bw(ip_bus),
        _wrong(r.in_place_wrong),
    ]  # fmt: skip


def _extras(r: BenchRow, compact: bool) -> list[str]:
    if compact:
        return [_fmt_bw(r.linkbw_gb_per_s), f"{r.algo}/{r.proto}/{r.channels}"]
    return [_fmt_bw(r.linkbw_gb_per_s), r.algo, r.proto, str(r.channels)]


#: nccl-tests' columns (gap before, width): ``%12li  %12li  %8s  %6s  %6i`` and, per group,
#: ``  %7s  %6.2f  %6.2f  %5s`` (its ``#wrong`` header overhangs the gap by one).
_PREFIX_COLS = [(0, 12), (2, 12), (2, 8), (2, 6), (2, 6)]
_PREFIX_HEAD = [("size", "(B)"), ("count", "(elements)"), ("type", ""), ("redop", ""), ("root", "")]
_GROUP_COLS = [(2, 7), (2, 6), (2, 6), (1, 6)] * 2
_GROUP_HEAD = [("time", "(us)"), ("algbw", "(GB/s)"), ("busbw", "(GB/s)"), ("#wrong", "")] * 2
#: nccl-tests' line over the two groups (64 characters, trailing spaces included).
_GROUP_TITLE = "           out-of-place                       in-place          "
#: scaleup's columns after nccl-tests' (one table; several series: algo/proto/ch in one cell).
_EXTRA_COLS = [(1, 8), (1, 12), (1, 6), (1, 8)]
_EXTRA_HEAD = [("linkbw", "(GB/s)"), ("algo", ""), ("proto", ""), ("channels", "")]
_COMPACT_COLS = [(1, 8), (1, 20)]
_COMPACT_HEAD = [("linkbw", "(GB/s)"), ("algo/proto/ch", "")]


def table_lines(series: Mapping[str, Sequence[BenchRow]]) -> list[str]:
    """nccl-tests' plain-text table (its out-of-place and in-place groups with ``#wrong``,
    fixed-width columns, '#' header lines) with scaleup's columns after them, so that a parser
    reading nccl-tests' 13 columns reads this; one column block per series when there are
    several (the count column moves into each block when the counts differ)."""
    labels = list(series)
    first = series[labels[0]]
    several = len(labels) > 1
    same_count = all([r.count for r in s] == [r.count for r in first] for s in series.values())
    shown = range(5) if same_count else (0, 2, 3, 4)
    pre_cols = [_PREFIX_COLS[i] for i in shown]
    pre_head = [_PREFIX_HEAD[i] for i in shown]
    count_cols, count_head = ([], []) if same_count else ([(2, 12)], [("count", "(elements)")])
    extra_cols, extra_head = (
        (_COMPACT_COLS, _COMPACT_HEAD) if several else (_EXTRA_COLS, _EXTRA_HEAD)
    )
    block_cols = count_cols + _GROUP_COLS + extra_cols
    block_head = count_head + _GROUP_HEAD + extra_head
    pre_width = len(_join(_cells([""] * len(pre_cols), pre_cols)))
    count_width = len(_join(_cells([""] * len(count_cols), count_cols)))
    extra_width = len(_join(_cells([""] * len(extra_cols), extra_cols)))
    block_width = count_width + len(_GROUP_TITLE) + extra_width
    title = " " * count_width + _GROUP_TITLE + (" " * extra_width if several else "")
    lines = ["#"]
    if several:
        lines.append("#" + " " * (pre_width - 1) + "".join(lab[:block_width].center(block_width)
                                                           for lab in labels))  # fmt: skip
    lines += [
        "#" + " " * (pre_width - 1) + title * len(labels),
        _head(_cells([h for h, _ in pre_head + block_head * len(labels)],
                     pre_cols + block_cols * len(labels))),
        _head(_cells([u for _, u in pre_head + block_head * len(labels)],
                     pre_cols + block_cols * len(labels))),
    ]  # fmt: skip
    for i, r0 in enumerate(first):
        cells = _cells(_prefix(r0, same_count), pre_cols)
        for label in labels:
            rows = series[label]
            if i < len(rows):
                r = rows[i]
                texts = ([] if same_count else [str(r.count)]) + _groups(r) + _extras(r, several)
                cells += _cells(texts, block_cols)
        lines.append(_join(cells))
    return lines


def footer_lines(series: Mapping[str, Sequence[BenchRow]]) -> list[str]:
    """nccl-tests' footer, one per series: ``# Out of bounds values`` (the wrong elements of
    every checked group; 0 when nothing was checked, as nccl-tests with ``-c 0``) and ``# Avg bus
    bandwidth`` (the mean over rows and both groups), then ``#``; and, where some rows were
    timed in steady state (:mod:`scaleup.sim.steady_ring`, :mod:`scaleup.sim.steady_pipeline`),
    which sizes."""
    lines = []
    for label, rows in series.items():
        suffix = f" ({label})" if len(series) > 1 else ""
        wrong = sum((r.wrong or 0) + (r.in_place_wrong or 0) for r in rows)
        per_row = [(r.busbw_gb_per_s + r.in_place_bw()[1]) / 2 for r in rows]
        avg = sum(per_row) / len(per_row) if per_row else 0.0
        lines.append(f"# Out of bounds values : {wrong} {'FAILED' if wrong else 'OK'}{suffix}")
        lines.append(f"# Avg bus bandwidth    : {avg:g} {suffix.strip()}")
        steady = [str(r.bytes) for r in rows if r.runtime == "sim-steady"]
        if steady:
            lines.append(
                f"# Timed in steady state (an approximation, no event loop; --exact runs it): "
                f"{', '.join(steady)} B{suffix}"
            )
    return [*lines, "#"]
