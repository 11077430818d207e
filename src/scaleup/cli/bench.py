"""``scaleup bench``: nccl-tests for machines you don't have (and, with ``--runtime``, for real).

With no flags it prints what ``all_reduce_perf -b 8 -e 8G -f 2 -g 8`` prints on a DGX H100,
simulated: nccl-tests' header, its columns (size, count, type, redop, root, time, algbw, busbw)
plus the tuner's algo, proto and channels and ``linkbw`` (busiest channel), and its footer
``# Avg bus bandwidth``. ``--topology a,b`` compares fabrics side by side in one table.

The flags are nccl-tests' with its meanings (``-b -e -f -d -o -r -n -w -c -g``): as in
nccl-tests, ``-o/--op`` is the reduction and the collective is what the binary would be
(``--collective all_gather``, or ``all_gather_perf``); a collective name given to ``--op`` still
selects the collective (scaleup's old spelling), ``--redop``, ``--ranks``, ``--nprocs``,
``--warmup`` and ``--dtype`` still work. ``-g`` is the rank count: simulated ranks, or processes
with ``--runtime``. ``-n``/``-w`` (iterations, warm-up) and ``-c`` (check) act on ``--runtime``
only; the simulated time does not depend on them.

The flags map to the fields of one :class:`~scaleup.tune.request.BenchRequest` in one place
(:func:`request_from_flags`), and the library's errors, which name fields, are reported with the
flag (:data:`FLAG_OF`). With ``--runtime`` the simulator's flags (``--topology``, ``--proto``,
``--channels``, ``--tuner``, ``--no-p2p``) are refused, not ignored.

NCCL's environment (``NCCL_ALGO``, ``NCCL_PROTO``, ``NCCL_MIN_NCHANNELS``, ``NCCL_MAX_NCHANNELS``,
``NCCL_NVLS_ENABLE``; :mod:`scaleup.tune.nccl_env`) narrows the simulated tuner as it narrows
NCCL's; ``--algo``, ``--proto`` and ``--channels`` take precedence over it. The header says which
variables were applied (nothing is added when none is set) and ``--json``/``--csv`` rows carry
them as ``nccl_env``.
"""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from scaleup.cli import render
from scaleup.cli.bench_table import (
    SweepArgs,
    footer_lines,
    runtime_header,
    sim_header,
    table_lines,
)
from scaleup.collectives.spec import COLLECTIVES, PROTOCOL_NAMES
from scaleup.errors import UsageError
from scaleup.report import BenchRow
from scaleup.topology.model import Topology
from scaleup.units import parse_size

if TYPE_CHECKING:
    from scaleup.tune import BenchRequest
    from scaleup.tune.nccl_env import NcclEnv

__all__ = [
    "FLAG_OF",
    "BenchFlags",
    "bench_cmd",
    "flag_errors",
    "nccl_env_of",
    "nccl_header",
    "register",
    "request_from_flags",
    "split_op",
    "split_topologies",
]

#: Default fabric of the simulated table.
DEFAULT_TOPOLOGY = "dgx-h100"
#: BenchRequest field (an error's ``source``) -> the flag that sets it.
FLAG_OF = {
    "op": "--collective",
    "sizes_bytes": "-b/-e",
    "min_bytes/max_bytes": "-b/-e",
    "factor": "-f",
    "dtype": "-d",
    "redop": "-o",
    "root": "-r",
    "ranks": "-g",
    "algorithm": "--algo",
    "protocol": "--proto",
    "channels": "--channels",
    "family": "--tuner",
    "runtime": "--runtime",
    "algorithms": "NCCL_ALGO",
    "protocols": "NCCL_PROTO",
    "min_channels": "NCCL_MIN_NCHANNELS",
    "max_channels": "NCCL_MAX_NCHANNELS",
}
#: The NCCL variables a flag takes precedence over.
_FLAG_OVERRIDES = {
    "--algo": ("NCCL_ALGO", "NCCL_NVLS_ENABLE"),
    "--proto": ("NCCL_PROTO",),
    "--channels": ("NCCL_MIN_NCHANNELS", "NCCL_MAX_NCHANNELS"),
}


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


#: nccl-tests' reductions (``-o``); ``mulsum`` and ``all`` are not offered (README).
_REDOPS = ("sum", "prod", "max", "min", "avg")
#: nccl-tests' binary names that differ from scaleup's collective names.
_BINARY_NAMES = {"alltoall": "all_to_all", "sendrecv": "send_recv"}


def _collective_name(text: str) -> str | None:
    """The collective ``text`` names (scaleup's name or nccl-tests' binary, ``all_gather_perf``),
    else None."""
    name = text.strip().lower().removesuffix("_perf")
    name = _BINARY_NAMES.get(name, name)
    return name if name in COLLECTIVES else None


def split_op(values: list[str] | None, collective: str | None) -> tuple[str, str]:
    """(collective, reduction) from ``-o/--op`` (given any number of times) and ``--collective``.

    nccl-tests' ``-o`` is the reduction; scaleup's ``--op`` used to be the collective, so a
    collective name there still selects it (the two name sets are disjoint).

    >>> split_op(["reduce", "max"], None), split_op(None, "all_gather_perf")
    (('reduce', 'max'), ('all_gather', 'sum'))
    """
    chosen = None
    if collective is not None:
        chosen = _collective_name(collective)
        if chosen is None:
            raise UsageError(
                f"unknown collective {collective!r}; known: {', '.join(COLLECTIVES)} "
                "(or nccl-tests' binary names, all_reduce_perf ...)",
                source="--collective",
            )
    redop = None
    for value in values or []:
        if value.strip().lower() in _REDOPS:
            if redop is not None:
                raise UsageError("-o/--op gives the reduction twice", source="-o")
            redop = value.strip().lower()
            continue
        named = _collective_name(value)
        if named is None:
            raise UsageError(
                f"unknown reduction {value!r}; known: {', '.join(_REDOPS)} "
                f"(the collective is --collective: {', '.join(COLLECTIVES)})",
                source="-o",
            )
        if chosen is not None and named != chosen:
            raise UsageError(
                f"two collectives, {chosen} and {named}; give one with --collective",
                source="--collective",
            )
        chosen = named
    return chosen or "all_reduce", redop or "sum"


@contextlib.contextmanager
def flag_errors(flag_of: dict[str, str]) -> Iterator[None]:
    """Re-raise a UsageError whose source is a library field with the flag that sets it."""
    try:
        yield
    except UsageError as error:
        flag = flag_of.get(error.source or "")
        if flag is None:
            raise
        raise type(error)(error.message, source=flag, entry=error.entry) from None


@dataclass(frozen=True)
class BenchFlags:
    """The flags of one ``scaleup bench`` call, as typed."""

    min_bytes: str
    max_bytes: str
    factor: float
    op: str
    dtype: str
    redop: str
    root: int
    ranks: int | None
    algo: str | None
    proto: str | None
    channels: int | None
    tuner: str | None
    no_p2p: bool
    topology: str | None
    runtime: str | None
    iters: int | None
    warmup: int | None
    check: int = 1
    explain: bool = False
    exact: bool = False
    environ: Mapping[str, str] | None = None  # NCCL_* are read from it (simulator only)


def nccl_env_of(flags: BenchFlags) -> tuple[NcclEnv, list[str]]:
    """NCCL's variables in ``flags.environ`` less those a given flag overrides, and the notes
    ``VAR (--flag)`` of the overridden ones. Empty with ``--runtime`` (NCCL is not running)."""
    from scaleup.tune.nccl_env import NcclEnv, read_nccl_env

    if flags.runtime is not None or flags.environ is None:
        return NcclEnv(), []
    given = {"--algo": flags.algo, "--proto": flags.proto, "--channels": flags.channels}
    dropped = {
        var: flag
        for flag, value in given.items()
        if value is not None
        for var in _FLAG_OVERRIDES[flag]
        if var in flags.environ
    }
    kept = {k: v for k, v in flags.environ.items() if k not in dropped}
    return read_nccl_env(kept), [f"{var} ({flag})" for var, flag in dropped.items()]


def nccl_header(flags: BenchFlags) -> list[str]:
    """The header line naming the NCCL variables applied; none when no variable is set."""
    env, overridden = nccl_env_of(flags)
    if not env.applied and not overridden:
        return []
    applied = " ".join(f"{k}={v}" for k, v in env.applied.items()) or "none"
    line = f"# NCCL environment applied: {applied}"
    if overridden:
        line += f"; overridden by flags: {', '.join(overridden)}"
    return [line]


def request_from_flags(flags: BenchFlags) -> tuple[BenchRequest, SweepArgs]:
    """The one place flags become a :class:`~scaleup.tune.request.BenchRequest` (and the header's
    echo of the sweep); ``-g`` is the rank count (processes with ``--runtime``)."""
    from scaleup.tune import BenchRequest, nccl_sizes

    lo, hi = parse_size(flags.min_bytes, source="-b"), parse_size(flags.max_bytes, source="-e")
    args = SweepArgs(flags.op, lo, hi, flags.factor, flags.dtype)
    nccl, _ = nccl_env_of(flags)
    with flag_errors(FLAG_OF):
        request = BenchRequest(
            op=flags.op,
            sizes_bytes=tuple(nccl_sizes(lo, hi, flags.factor)),
            dtype=flags.dtype,
            redop=flags.redop,
            root=flags.root,
            ranks=flags.ranks,
            algorithm=flags.algo,
            protocol=flags.proto,
            channels=flags.channels,
            family=flags.tuner or "nccl",
            algorithms=nccl.algorithms,
            protocols=nccl.protocols,
            min_channels=nccl.min_channels,
            max_channels=nccl.max_channels,
        )
    return request, args


def _check_mode(flags: BenchFlags) -> None:
    """Check nccl-tests' counts, and refuse the simulator's flags with ``--runtime`` (one line)."""
    if flags.iters is not None and flags.iters < 1:
        raise UsageError(f"iterations must be >= 1, got {flags.iters}", source="-n")
    if flags.warmup is not None and flags.warmup < 0:
        raise UsageError(f"warm-up iterations must be >= 0, got {flags.warmup}", source="-w")
    if flags.check not in (0, 1):
        raise UsageError(f"-c takes 0 (no check) or 1 (check), got {flags.check}", source="-c")
    if flags.runtime is None:
        return
    sim_only = {
        "--topology": flags.topology is not None,
        "--proto": flags.proto is not None,
        "--channels": flags.channels is not None,
        "--tuner": flags.tuner is not None,
        "--no-p2p": flags.no_p2p,
        "--explain": flags.explain,
        "--exact": flags.exact,
    }
    given = [flag for flag, is_given in sim_only.items() if is_given]
    if given:
        raise UsageError(
            f"{given[0]} applies to the simulator; --runtime measures this machine's processes "
            "(-g sets their number)",
            source=given[0],
        )
    if flags.ranks is None or flags.ranks < 1:
        raise UsageError("--runtime needs -g N (N >= 1 processes)", source="-g")


def _topologies(flags: BenchFlags) -> dict[str, Topology]:
    from scaleup.topology import resolve_topology

    labels = split_topologies(flags.topology or DEFAULT_TOPOLOGY)
    topos = [resolve_topology(t) for t in labels]
    if flags.no_p2p:
        topos = [t.with_peer_access(False) for t in topos]
        labels = [f"{lab}:no-p2p" for lab in labels]
    if len(set(labels)) != len(labels):
        raise UsageError("--topology lists the same fabric twice", source="--topology")
    return dict(zip(labels, topos, strict=True))


def _simulate(
    flags: BenchFlags, request: BenchRequest
) -> tuple[dict[str, list[BenchRow]], dict[str, Topology]]:
    from scaleup.bench import bench_rows
    from scaleup.tune import TuneSession

    topos = _topologies(flags)
    session = TuneSession(exact=flags.exact)  # one session: structures checked once per fabric
    bar = render.progress_bar()
    series: dict[str, list[BenchRow]] = {}
    with bar if bar is not None else contextlib.nullcontext(), flag_errors(FLAG_OF):
        for label, topo in topos.items():
            update: Callable[[int, int], None] | None = None
            if bar is not None:
                task = bar.add_task(f"bench {label}", total=None)
                update = lambda done, total, t=task: bar.update(t, completed=done, total=total)  # noqa: E731
            series[label] = bench_rows(topo, request, session=session, progress=update)
    return series, topos


def _measure(flags: BenchFlags, request: BenchRequest) -> dict[str, list[BenchRow]]:
    from scaleup.bench import runtime_rows

    assert flags.runtime is not None  # noqa: S101 - the caller dispatches on it
    with flag_errors(FLAG_OF):
        rows = runtime_rows(
            request, flags.runtime, iters=flags.iters, warmup=flags.warmup, check=flags.check == 1
        )
    return {f"runtime-{flags.runtime}": rows}


def _render(
    series: dict[str, list[BenchRow]],
    topos: dict[str, Topology],
    args: SweepArgs,
    flags: BenchFlags,
    output: tuple[bool, bool, Path | None],
) -> None:
    json_out, csv_out, plot = output
    if plot is not None:
        from scaleup.cli.bench_plot import plot_busbw

        plot_busbw(series, plot)
    all_rows = [r.to_dict() for rows in series.values() for r in rows]
    applied = nccl_env_of(flags)[0].applied
    if applied:  # recorded only when set: the default output stays as it was
        note = " ".join(f"{k}={v}" for k, v in applied.items())
        all_rows = [{**row, "nccl_env": dict(applied) if json_out else note} for row in all_rows]
    if json_out or csv_out:
        (render.print_json if json_out else render.print_csv)(all_rows)
        return
    lines: list[str] = []
    for label, rows in series.items():
        if label in topos:
            lines += sim_header(label, topos[label], rows, args)
        else:
            lines.append(runtime_header(label.split("-", 1)[1], rows, args, flags.ranks or 0))
    lines += nccl_header(flags)
    lines += table_lines(series) + footer_lines(series)
    if plot is not None:
        lines.append(f"# plot written to {plot}")
    for line in lines:
        render.console.print(line, markup=False, highlight=False)


def _explain(
    flags: BenchFlags,
    request: BenchRequest,
    args: SweepArgs,
    output: tuple[bool, bool, Path | None],
) -> None:
    """``--explain``: the table, then every size's candidates (or their JSON records)."""
    from scaleup.cli.bench_explain import explain_series, print_explanations

    if output[1]:
        raise UsageError("--explain prints a report; use --json for its data", source="--csv")
    topos = _topologies(flags)
    with flag_errors(FLAG_OF):
        series, explained = explain_series(topos, request)
    if not output[0]:
        _render(series, topos, args, flags, output)
    print_explanations(explained, output[0])


_OPTIONS: dict[str, Any] = {
    "min_bytes": typer.Option("8", "-b", "--minbytes", help="Smallest size (e.g. 8, 64K, 1M)."),
    "max_bytes": typer.Option("8G", "-e", "--maxbytes", help="Largest size (powers of 1024: 8G)."),
    "factor": typer.Option(2.0, "-f", "--stepfactor", help="Multiply the size by this (> 1)."),
    "op": typer.Option(
        None,
        "-o",
        "--op",
        "--redop",
        help="Reduction: " + "|".join(_REDOPS) + " (nccl-tests' -o; avg is a sum scaled by 1/n, "
        "never NVLS). A collective name still selects the collective (old --op).",
    ),
    "collective": typer.Option(
        None,
        "--collective",
        help="Collective, as nccl-tests' binary: " + "|".join(COLLECTIVES) + " (or all_gather_perf"
        " ...); default all_reduce.",
    ),
    "dtype": typer.Option(
        "float32", "-d", "--datatype", "--dtype", help="Element type (float32, float16, int32 ...)."
    ),
    "root": typer.Option(0, "-r", "--root", help="Root rank of broadcast and reduce."),
    "ranks": typer.Option(
        None,
        "-g",
        "--ngpus",
        "--ranks",
        "--nprocs",
        help="Ranks: the first N accelerators (simulated), or N processes with --runtime; "
        "--ranks and --nprocs are the old names.",
    ),
    "algo": typer.Option(
        None,
        "--algo",
        help="Force an algorithm (ring, tree, nvls, direct, ...); over NCCL_ALGO/NCCL_NVLS_ENABLE.",
    ),
    "proto": typer.Option(
        None,
        "--proto",
        help="Force a protocol: " + "|".join(PROTOCOL_NAMES) + "; over NCCL_PROTO.",
    ),
    "channels": typer.Option(
        None, "--channels", help="Force a channel count; over NCCL_MIN/MAX_NCHANNELS."
    ),
    "tuner": typer.Option(
        None, "--tuner", help="Algorithms the tuner picks from: nccl (default)|all (adds ours)."
    ),
    "no_p2p": typer.Option(False, "--no-p2p", help="Peer access off: stage through host memory."),
    "topology": typer.Option(
        None,
        "--topology",
        help=f"Preset, Nx<preset>, file; a,b compares (default {DEFAULT_TOPOLOGY}).",
    ),
    "json_out": typer.Option(False, "--json", help="Print the rows as JSON."),
    "csv_out": typer.Option(False, "--csv", help="Print the rows as CSV."),
    "plot": typer.Option(None, "--plot", help="Also write busbw vs size to this image."),
    "runtime": typer.Option(None, "--runtime", help="Measure for real: shm|pipe|mpi."),
    "iters": typer.Option(
        None,
        "-n",
        "--iters",
        help="Timed iterations per size (--runtime; default scaled by size). The simulated time "
        "does not depend on it.",
    ),
    "warmup": typer.Option(
        None,
        "-w",
        "--warmup_iters",
        "--warmup",
        help="Warm-up iterations per size (--runtime); the simulated time does not depend on it.",
    ),
    "check": typer.Option(
        1,
        "-c",
        "--check",
        help="1: check every timed --runtime iteration against numpy (#wrong); 0: do not. The "
        "simulator has nothing to check (N/A).",
    ),
    "explain": typer.Option(
        False, "--explain", help="Per size: every candidate, its time, what bounds it, channels."
    ),
    "exact": typer.Option(
        False, "--exact", help="Simulate every flow (no symmetry classes): the reference mode."
    ),
}


def bench_cmd(
    min_bytes: str = _OPTIONS["min_bytes"],
    max_bytes: str = _OPTIONS["max_bytes"],
    factor: float = _OPTIONS["factor"],
    op: list[str] | None = _OPTIONS["op"],
    collective: str | None = _OPTIONS["collective"],
    dtype: str = _OPTIONS["dtype"],
    root: int = _OPTIONS["root"],
    ranks: int | None = _OPTIONS["ranks"],
    algo: str | None = _OPTIONS["algo"],
    proto: str | None = _OPTIONS["proto"],
    channels: int | None = _OPTIONS["channels"],
    tuner: str | None = _OPTIONS["tuner"],
    no_p2p: bool = _OPTIONS["no_p2p"],
    topology: str | None = _OPTIONS["topology"],
    json_out: bool = _OPTIONS["json_out"],
    csv_out: bool = _OPTIONS["csv_out"],
    plot: Path | None = _OPTIONS["plot"],
    runtime: str | None = _OPTIONS["runtime"],
    iters: int | None = _OPTIONS["iters"],
    warmup: int | None = _OPTIONS["warmup"],
    check: int = _OPTIONS["check"],
    explain: bool = _OPTIONS["explain"],
    exact: bool = _OPTIONS["exact"],
) -> None:
    """Print nccl-tests' table for a collective on a simulated fabric (default: dgx-h100).

    nccl-tests' flags mean what they mean there: -o/--op the reduction, -n/-w iterations and
    warm-up, -c check, -g ranks (processes with --runtime); the collective is --collective.

    The simulator honours NCCL's environment with NCCL's syntax: NCCL_ALGO and NCCL_PROTO
    (comma-separated names, any case; a leading ^ excludes them), NCCL_MIN_NCHANNELS,
    NCCL_MAX_NCHANNELS, NCCL_NVLS_ENABLE=0. --algo, --proto and --channels take precedence;
    the header names the variables applied.
    """
    name, redop = split_op(op, collective)
    flags = BenchFlags(min_bytes, max_bytes, factor, name, dtype, redop, root, ranks, algo, proto,
                   channels, tuner, no_p2p, topology, runtime, iters, warmup, check,
                   explain, exact, os.environ)  # fmt: skip
    if json_out and csv_out:
        raise UsageError("choose one of --json and --csv", source="--json/--csv")
    _check_mode(flags)
    request, args = request_from_flags(flags)
    topos: dict[str, Topology] = {}
    if explain:
        _explain(flags, request, args, (json_out, csv_out, plot))
        return
    if runtime is None:
        series, topos = _simulate(flags, request)
    else:
        series = _measure(flags, request)
    _render(series, topos, args, flags, (json_out, csv_out, plot))


def register(app: typer.Typer) -> None:
    """Add the ``bench`` command to the scaleup app."""
    app.command("bench")(bench_cmd)
