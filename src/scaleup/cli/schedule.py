"""``scaleup schedule``: build, show, verify, time and export collective schedules.

Schedule files are scaleup's JSON or MSCCL XML (``.xml``, as msccl-tools/TACCL write them;
``--count`` sizes them). Exit codes: 0 when all is well, 1 when a schedule fails verification (the
failing op named on stderr), 2 on bad input (unknown algorithm/op/dtype, unsupported pair,
unreadable file, bad JSON or XML).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer

from scaleup.cli import render
from scaleup.collectives.schedule import Schedule
from scaleup.collectives.schedule_files import FORMATS, load_schedule, schedule_text
from scaleup.collectives.spec import PROTOCOL_NAMES, CollectiveSpec, itemsize, numpy_dtype
from scaleup.errors import (
    LimitError,
    ScheduleError,
    UnsupportedCollective,
    UsageError,
)
from scaleup.units import format_bytes, parse_size

__all__ = ["register", "schedule_app"]

schedule_app = typer.Typer(
    help="Collective schedules: show their ops and traffic, verify, time and export them.",
    no_args_is_help=True,
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
_FILE = typer.Option(
    None, "--file", "-f", help="A schedule file (scaleup JSON, or MSCCL XML sized by --count)."
)
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
    from scaleup.collectives.algorithms import build_schedule

    if not algo or not op:
        raise UsageError("give ALGO and OP (or --file for verify)", source="arguments")
    if ranks is None or count is None:
        raise UsageError("give --ranks and --count", source="arguments")
    spec = CollectiveSpec(
        op, nranks=ranks, count=parse_size(count, source="--count"), root=root, redop=redop
    )
    return build_schedule(algo, spec, **{k: v for k, v in params.items() if v is not None})


def _schedule(
    file: Path | None,
    algo: str | None,
    op: str | None,
    ranks: int | None,
    count: str | None,
    *,
    root: int,
    redop: str,
    params: dict[str, Any],
) -> Schedule:
    """The schedule of ``--file`` (``--count`` sizing an MSCCL XML file), or the one built."""
    if file is None:
        return _build(algo, op, ranks, count, root=root, redop=redop, params=params)
    if algo or op:
        raise UsageError("give ALGO and OP or --file, not both", source="arguments")
    return load_schedule(file, count=None if count is None else parse_size(count, source="--count"))


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


def _verified(
    schedule: Schedule, file: Path | None, dtype: str, *, seed: int = 0, in_place: bool = False
) -> Any:
    """verify()'s report; a failing schedule prints FAIL naming the op and exits 1."""
    from scaleup.collectives.verify import verify

    in_place = in_place or bool(schedule.params.get("in_place", False))
    try:
        return verify(schedule, dtype, seed=seed, in_place=in_place)
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
    schedule = _schedule(
        file, algo, op, ranks, count, root=root, redop=redop,
        params=_params(channels, chunks, ranks_per_node, shot, bidirectional),
    )  # fmt: skip
    report = _verified(schedule, file, dtype, seed=seed, in_place=in_place)
    render.console.print(f"ok: {report}", markup=False)


@schedule_app.command("export")
def export_cmd(
    algo: str = _ALGO,
    op: str = _OP,
    ranks: int = _RANKS,
    count: str = _COUNT,
    file: Path = _FILE,
    fmt: str = typer.Option("msccl-xml", "--format", help=f"Output format: {', '.join(FORMATS)}."),
    output: Path = typer.Option(None, "--output", "-o", help="Write here (default: stdout)."),
    protocol: str = typer.Option(
        None, "--protocol", help="MSCCL proto: simple, ll or ll128 (default: the schedule's)."
    ),
    channels: int = _CHANNELS,
    chunks: int = _CHUNKS,
    ranks_per_node: int = _RPN,
    shot: int = _SHOT,
    bidirectional: bool = _BIDI,
    root: int = _ROOT,
    redop: str = _REDOP,
) -> None:
    """Write a schedule (built, or read with --file) as MSCCL XML or scaleup JSON."""
    schedule = _schedule(
        file, algo, op, ranks, count, root=root, redop=redop,
        params=_params(channels, chunks, ranks_per_node, shot, bidirectional),
    )  # fmt: skip
    text = schedule_text(schedule, fmt, protocol=protocol)
    if output is None:
        print(text, end="")
        return
    try:
        output.write_text(text, encoding="utf-8")
    except OSError as error:
        raise UsageError(f"cannot write: {error.strerror or error}", source=str(output)) from None
    render.err_console.print(f"wrote {output} ({schedule.n_ops} ops, {fmt})", markup=False)


@schedule_app.command("time")
def time_cmd(
    algo: str = _ALGO,
    op: str = _OP,
    ranks: int = _RANKS,
    count: str = _COUNT,
    file: Path = _FILE,
    topology: str = typer.Option(
        "dgx-h100", "--topology", "-t", help="Preset (name:k=v,...), Nx<preset> or TOML file."
    ),
    protocol: str = typer.Option(
        None, "--protocol", help="simple, ll or ll128 (default: the schedule's, else simple)."
    ),
    dtype: str = _DTYPE,
    json_out: bool = typer.Option(False, "--json", help="Print the result as JSON."),
    csv_out: bool = typer.Option(False, "--csv", help="Print the result as CSV."),
    channels: int = _CHANNELS,
    chunks: int = _CHUNKS,
    ranks_per_node: int = _RPN,
    shot: int = _SHOT,
    bidirectional: bool = _BIDI,
    root: int = _ROOT,
    redop: str = _REDOP,
) -> None:
    """Time a schedule on a topology (nccl-tests columns); it is verified first."""
    from scaleup.sim.simulate import simulate
    from scaleup.topology.presets import resolve_topology

    render.check_one_format(json_out, csv_out)
    numpy_dtype(dtype)
    schedule = _schedule(
        file, algo, op, ranks, count, root=root, redop=redop,
        params=_params(channels, chunks, ranks_per_node, shot, bidirectional),
    )  # fmt: skip
    proto = (protocol or str(schedule.params.get("protocol", "simple"))).lower()
    if proto not in PROTOCOL_NAMES:
        raise UsageError(f"unknown protocol {proto!r} (simple, ll or ll128)", source="--protocol")
    _verified(schedule, file, dtype)
    result = simulate(schedule, resolve_topology(topology), dtype=dtype, protocol=proto)
    size = schedule.spec.count * itemsize(dtype)
    algbw = size / result.time_s / 1e9 if result.time_s > 0 else 0.0
    row = {
        "algorithm": schedule.algorithm, "collective": schedule.spec.collective,
        "nranks": schedule.nranks, "topology": result.topology, "protocol": proto,
        "dtype": dtype, "size_bytes": size, "time_us": result.time_us,
        "algbw_gb_per_s": algbw, "busbw_gb_per_s": algbw * schedule.spec.busbw_factor(),
    }  # fmt: skip
    if json_out or csv_out:
        render.print_records(row, [row], csv_out=csv_out)
        return
    shown = {k: f"{v:.2f}" if isinstance(v, float) else v for k, v in row.items()}
    title = f"{schedule} on {result.topology}"
    render.print_table(list(shown), [list(shown.values())], title=title)


def register(app: typer.Typer) -> None:
    """Add the ``schedule`` command group to the scaleup app."""
    app.add_typer(schedule_app, name="schedule")
