"""``scaleup schedule``: build, show and verify collective schedules.

Exit codes: 0 when all is well, 1 when a schedule fails verification (the failing op named on
stderr), 2 on bad input (unknown algorithm/op/dtype, unsupported pair, unreadable file, bad JSON).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer

from scaleup.cli import render
from scaleup.collectives.algorithms import build_schedule
from scaleup.collectives.schedule import Schedule
from scaleup.collectives.spec import CollectiveSpec, itemsize, numpy_dtype
from scaleup.collectives.verify import verify
from scaleup.errors import (
    InputError,
    LimitError,
    ScheduleError,
    UnsupportedCollective,
    UsageError,
)
from scaleup.units import format_bytes, parse_size

__all__ = ["register", "schedule_app"]

schedule_app = typer.Typer(
    help="Collective schedules: show their ops and traffic, verify them.", no_args_is_help=True
)

_ALGO = typer.Argument(None, help="Algorithm: ring, tree, recursive, direct, nvls, hierarchical.")
_OP = typer.Argument(
    None, help="Collective: all_reduce, reduce_scatter, all_gather, broadcast, ..."
)
_RANKS = typer.Option(None, "--ranks", "-n", help="World size.")
_COUNT = typer.Option(None, "--count", "-c", help="Elements (nccl-tests count; 1K = 1024).")
_CHANNELS = typer.Option(None, "--channels", help="Parallel rings/trees/lanes.")
_CHUNKS = typer.Option(None, "--chunks", help="Pipelining depth (pieces per lane).")
_RPN = typer.Option(None, "--ranks-per-node", help="Ranks per node (hierarchical).")
_SHOT = typer.Option(None, "--shot", help="direct all_reduce: 1 (one-shot) or 2 (two-shot).")
_BIDI = typer.Option(False, "--bidirectional", help="ring: half the data each way round.")
_ROOT = typer.Option(0, "--root", help="Root of broadcast and reduce.")
_REDOP = typer.Option("sum", "--redop", help="sum, prod, max or min.")
_FILE = typer.Option(None, "--file", "-f", help="Verify a Schedule JSON file instead.")
_DTYPE = typer.Option(
    "float32", "-d", "--dtype", help="Element type (int32, float16, bfloat16, float32, ...)."
)


def _build(
    algo: str | None,
    op: str | None,
    ranks: int | None,
    count: str | None,
    *,
    root: int,
    redop: str,
    params: dict[str, Any],
) -> Schedule:
    if not algo or not op:
        raise UsageError("give ALGO and OP (or --file for verify)", source="arguments")
    if ranks is None or count is None:
        raise UsageError("give --ranks and --count", source="arguments")
    spec = CollectiveSpec(
        op, nranks=ranks, count=parse_size(count, source="--count"), root=root, redop=redop
    )
    return build_schedule(algo, spec, **{k: v for k, v in params.items() if v is not None})


def _params(
    channels: int | None,
    chunks: int | None,
    ranks_per_node: int | None,
    shot: int | None,
    bidirectional: bool,
) -> dict[str, Any]:
    return {
        "channels": channels,
        "chunks": chunks,
        "ranks_per_node": ranks_per_node,
        "shot": shot,
        "bidirectional": True if bidirectional else None,
    }


@schedule_app.command("show")
def show(
    algo: str = _ALGO,
    op: str = _OP,
    ranks: int = _RANKS,
    count: str = _COUNT,
    json_out: bool = typer.Option(
        False, "--json", help="Print the Schedule JSON (readable by verify --file)."
    ),
    csv_out: bool = typer.Option(False, "--csv", help="Print the ops as CSV, one per line."),
    channels: int = _CHANNELS,
    chunks: int = _CHUNKS,
    ranks_per_node: int = _RPN,
    shot: int = _SHOT,
    bidirectional: bool = _BIDI,
    root: int = _ROOT,
    redop: str = _REDOP,
    dtype: str = _DTYPE,
    limit: int = typer.Option(50, "--limit", help="Ops to list."),
) -> None:
    """Show a schedule: its ops (first --limit), bytes sent/received per rank, number of steps."""
    render.check_one_format(json_out, csv_out)
    size = itemsize(dtype)  # the element size alone: bfloat16 needs no ml_dtypes here
    schedule = _build(
        algo,
        op,
        ranks,
        count,
        root=root,
        redop=redop,
        params=_params(channels, chunks, ranks_per_node, shot, bidirectional),
    )
    if json_out or csv_out:
        data = schedule.to_dict()
        render.print_records(data, data["ops"], csv_out=csv_out)
        return
    render.console.print(str(schedule))
    render.console.print(schedule.format_ops(limit))
    sent = schedule.bytes_sent_per_rank(size)
    received = schedule.bytes_received_per_rank(size)
    render.print_table(
        ["rank", "sent", "received", "sent_bytes", "received_bytes"],
        [
            [
                r,
                format_bytes(int(sent[r])),
                format_bytes(int(received[r])),
                int(sent[r]),
                int(received[r]),
            ]
            for r in range(schedule.nranks)
        ],
        title=f"traffic per rank ({dtype}), {schedule.n_steps} steps, {schedule.n_ops} ops",
    )


@schedule_app.command("verify")
def verify_cmd(
    algo: str = _ALGO,
    op: str = _OP,
    ranks: int = _RANKS,
    count: str = _COUNT,
    file: Path = _FILE,
    dtype: str = _DTYPE,
    channels: int = _CHANNELS,
    chunks: int = _CHUNKS,
    ranks_per_node: int = _RPN,
    shot: int = _SHOT,
    bidirectional: bool = _BIDI,
    root: int = _ROOT,
    redop: str = _REDOP,
    seed: int = typer.Option(0, "--seed", help="Seed of the input data."),
    in_place: bool = typer.Option(
        False,
        "--in-place",
        help="Alias every rank's output to its input, as the runtime's in-place collectives do.",
    ),
) -> None:
    """Replay a schedule on numpy buffers: exit 0 if correct, 1 naming the op, 2 on bad input."""
    numpy_dtype(dtype)
    if file is not None:
        try:
            text = file.read_text()
        except OSError as error:
            raise InputError(f"cannot read: {error.strerror or error}", source=str(file)) from error
        schedule = Schedule.from_json(text, source=str(file))
    else:
        schedule = _build(
            algo,
            op,
            ranks,
            count,
            root=root,
            redop=redop,
            params=_params(channels, chunks, ranks_per_node, shot, bidirectional),
        )
    try:
        report = verify(schedule, dtype, seed=seed, in_place=in_place)
    except UnsupportedCollective:
        raise
    except LimitError as error:
        if file is not None and error.source == "count":  # sized by the file, not by --count
            error.source, error.entry = str(file), "spec"
        raise
    except ScheduleError as error:
        render.err_console.print(
            f"FAIL: {schedule.algorithm} {schedule.spec.name}: {error.one_line()}", markup=False
        )
        raise typer.Exit(1) from None
    render.console.print(f"ok: {report}", markup=False)


def register(app: typer.Typer) -> None:
    """Add the ``schedule`` command group to the scaleup app."""
    app.add_typer(schedule_app, name="schedule")
