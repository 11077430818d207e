"""``scaleup bench --explain``: every candidate the tuner considered, per size, and why one won.

After nccl-tests' table, one block per (fabric, size): the choice, a rich table of the
candidates (algorithm/protocol/channels, chunks, simulated or pruned, time or the lower bound
that pruned it, what bounds it and how busy that was), a line to check the chosen time by hand
(the busiest constraint's bytes over its capacity), the collective's LP lower bound on the fabric
(what no schedule beats; the chosen time over it) and the chosen candidate's channels as rank
orders. ``--json`` prints the :class:`~scaleup.tune.explain.Explanation` records instead. The
library computes (:func:`scaleup.tune.explain.explain_sweep`); this module only renders.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from rich import box
from rich.console import Console
from rich.table import Table
from rich.text import Text

from scaleup.cli import render

if TYPE_CHECKING:
    from scaleup.report import BenchRow
    from scaleup.sim.straggler import Stragglers
    from scaleup.topology.model import Topology
    from scaleup.tune import BenchRequest
    from scaleup.tune.explain import Bound, CandidateTiming, Explanation
    from scaleup.tune.lp_bound import LpBound

__all__ = ["candidate_table", "explain_lines", "explain_series", "print_explanations"]

#: Width rich may use for a candidate table (it is never wider than its content).
_TABLE_WIDTH = 160


def explain_series(
    topos: Mapping[str, Topology], request: BenchRequest, *, stragglers: Stragglers | None = None
) -> tuple[dict[str, list[BenchRow]], dict[str, list[Explanation]]]:
    """nccl-tests' rows and the explanations of every fabric, from one tuning session (the rows
    reuse the explained sweep's timings); ``stragglers`` apply to every run."""
    from scaleup.bench import bench_rows
    from scaleup.tune import TuneSession
    from scaleup.tune.explain import explain_sweep

    session = TuneSession(stragglers=stragglers)
    rows: dict[str, list[BenchRow]] = {}
    explained: dict[str, list[Explanation]] = {}
    for label, topo in topos.items():
        explained[label] = explain_sweep(topo, request, session=session)[1]
        rows[label] = bench_rows(topo, request, session=session)
    return rows, explained


def _us(seconds: float | None) -> str:
    return "" if seconds is None else f"{seconds * 1e6:.2f}"


def _bound_text(bound: Bound | None) -> str:
    if bound is None:
        return ""
    if bound.kind == "latency":
        return f"latency (busiest: {bound.constraint_kind} {bound.constraint})"
    if bound.kind == "in-switch reduction":
        return f"in-switch reduction ({bound.constraint_kind} {bound.constraint})"
    return f"{bound.kind} {bound.constraint}"


def candidate_table(explanation: Explanation) -> Table:
    """The candidates of one size, the chosen one first and marked ``*``, then least time."""
    table = Table(box=box.SIMPLE_HEAD, header_style="bold", pad_edge=False)
    for name, justify in (("", "left"), ("algo/proto/ch", "left"), ("chunks", "right"),
                          ("status", "left"), ("time (us)", "right"), ("bound (us)", "right"),
                          ("bound by", "left"), ("busy", "right")):  # fmt: skip
        table.add_column(name, justify=justify)  # type: ignore[arg-type]
    for c in explanation.candidates:
        util = c.bound.utilisation if c.bound is not None else None
        cells = (
            "*" if c.chosen else "",
            f"{c.algorithm}/{c.protocol}/{c.channels}",
            str(c.chunks),
            c.status if not c.reason else f"{c.status}: {c.reason}",
            _us(c.time_s),
            _us(c.bound_s),
            _bound_text(c.bound),
            "" if util is None else f"{util:.1%}",
        )
        table.add_row(*(Text(cell) for cell in cells))  # names are not markup
    return table


def _size(nbytes: float) -> str:
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("KB", 1e3)):
        if nbytes >= scale:
            return f"{nbytes / scale:.2f} {unit}"
    return f"{nbytes:.0f} B"


def _by_hand(chosen: CandidateTiming) -> str:
    b = chosen.bound
    if b is None or chosen.time_s is None:
        return "#   (no structure to check)"
    need = (
        f"{b.constraint} ({b.constraint_kind}) carries {_size(b.payload_bytes)} (load "
        f"{_size(b.load_bytes)}) at {b.capacity_bytes_per_s / 1e9:.2f} GB/s = "
        f"{b.busy_s * 1e6:.2f} us of {chosen.time_s * 1e6:.2f} us ({b.utilisation or 0:.1%} busy)"
    )
    if b.kind == "latency":
        return f"#   by hand: latency-bound; the busiest, {need}: the rest is latency"
    return f"#   by hand: {need}; the rest is launch and per-step latency"


def _lp_line(lp: LpBound | None) -> list[str]:
    if lp is None:
        return []
    if lp.time_over_bound is None or lp.efficiency is None:
        return [f"#   LP lower bound: none ({lp.note or 'nothing to time'})"]
    how = lp.formulation + (", switches reduce in-network" if lp.in_network_reduction else "")
    line = (
        f"#   LP lower bound ({how}): {lp.time_s * 1e6:.2f} us, busbw {lp.busbw_gb_per_s:.1f} "
        f"GB/s; chosen takes {lp.time_over_bound:.2f}x the bound ({lp.efficiency:.1%} of the best)"
    )
    return [line] + ([f"#     ({lp.note})"] if lp.note else [])


def _model_lines(e: Explanation) -> list[str]:
    """The library's own predictions (NCCL's, RCCL's on AMD nodes), where the choice is its
    model's (``--select nccl-model``)."""
    if not e.predicted:
        return []
    ranked = sorted(e.predicted, key=lambda p: p[2])
    cells = [
        f"{'*' if (a, p) == (e.algorithm, e.protocol) else ''}{a}/{p} {t * 1e6:.1f} us"
        for a, p, t in ranked
    ]
    head = (
        f"#   picked as {e.model}'s cost model picks (tuning.cc ncclTopoGetAlgoTime; "
        "--select nccl-model), its predicted times:"
    )
    if e.plugin:
        head = (
            f"#   picked by the {e.plugin} (nccl_ofi_regions.cpp; NCCL_TUNER_PLUGIN=none turns "
            "it off) over NCCL's cost model, whose predicted times are:"
        )
    return [head, "#     " + ", ".join(cells)]


def explain_lines(explanation: Explanation) -> tuple[str, list[str]]:
    """The heading of one size's block and its lines after the table (by hand, channels)."""
    e = explanation
    chosen = e.chosen
    step = "" if chosen.step_bytes is None else f" ({chosen.step_bytes:.0f} B a step)"
    head = (
        f"# explain {e.topology}: {e.collective} {e.nbytes} B ({e.count} x {e.dtype}) on "
        f"{e.nranks} ranks: chose {e.algorithm}/{e.protocol}/{e.channels}, {e.chunks} "
        f"chunk(s){step}, {e.time_s * 1e6:.2f} us ({e.verification}); "
        f"{len(e.candidates)} candidates"
    )
    tail = [_by_hand(chosen), *_lp_line(e.lp_bound), *_model_lines(e)]
    tail.append(f"#   channels of {e.algorithm}/{e.protocol}/{e.channels}:")
    tail += [f"#     ch {p.channel}: {p.text()}" for p in chosen.channel_paths]
    return head, tail


def print_explanations(explained: Mapping[str, Sequence[Explanation]], json_out: bool) -> None:
    """Print every explanation: JSON records (with the fabric's label), or the blocks."""
    if json_out:
        render.print_json(
            [{"label": label, **e.to_dict()} for label, exps in explained.items() for e in exps]
        )
        return
    out = render.console
    if not out.is_terminal:  # a file or a pipe: as wide as the table, never wrapped
        out = Console(width=_TABLE_WIDTH, highlight=False, soft_wrap=True)
    for exps in explained.values():
        for e in exps:
            head, tail = explain_lines(e)
            out.print("#", markup=False)
            out.print(head, markup=False)
            out.print(candidate_table(e))
            for line in tail:
                out.print(line, markup=False)
