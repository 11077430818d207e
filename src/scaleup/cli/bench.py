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

``--fail-link A-B`` and ``--degrade A-B=F`` (each repeatable) damage every fabric of the table:
the links between devices A and B removed, or their bandwidth multiplied by F
(:mod:`scaleup.topology.faults`); the label and the header name the damage (docs/faults.md).

NCCL's environment (``NCCL_ALGO``, ``NCCL_PROTO``, ``NCCL_MIN_NCHANNELS``, ``NCCL_MAX_NCHANNELS``,
``NCCL_NVLS_ENABLE``; :mod:`scaleup.tune.nccl_env`) narrows the simulated tuner as it narrows
NCCL's; ``--algo``, ``--proto`` and ``--channels`` take precedence over it. The header says which
variables were applied (nothing is added when none is set) and ``--json``/``--csv`` rows carry
them as ``nccl_env``.
"""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from scaleup.cli.bench_flags import (
    DEFAULT_TOPOLOGY,
    FLAG_OF,
    REDOPS,
    BenchFlags,
    check_mode,
    flag_errors,
    nccl_env_of,
    nccl_header,
    request_from_flags,
    split_op,
    split_topologies,
    stragglers_of,
)
from scaleup.cli.bench_jobs import print_jobs
from scaleup.cli.bench_run import explain as run_explain
from scaleup.cli.bench_run import measure, print_series, simulate
from scaleup.collectives.spec import COLLECTIVES, PROTOCOL_NAMES
from scaleup.errors import UsageError

if TYPE_CHECKING:
    from scaleup.topology.model import Topology

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

_OPTIONS: dict[str, Any] = {
    "min_bytes": typer.Option("8", "-b", "--minbytes", help="Smallest size (e.g. 8, 64K, 1M)."),
    "max_bytes": typer.Option("8G", "-e", "--maxbytes", help="Largest size (powers of 1024: 8G)."),
    "factor": typer.Option(2.0, "-f", "--stepfactor", help="Multiply the size by this (> 1)."),
    "op": typer.Option(
        None,
        "-o",
        "--op",
        "--redop",
        help="Reduction: " + "|".join(REDOPS) + " (nccl-tests' -o; avg is a sum scaled by 1/n, "
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
    "select": typer.Option(
        None,
        "--select",
        help="How the tuner picks: fastest (least simulated time) | nccl-model (the library's "
        "own cost model, tuning.cc: NCCL's, RCCL's on AMD nodes; then simulated).",
    ),
    "no_p2p": typer.Option(False, "--no-p2p", help="Peer access off: stage through host memory."),
    "topology": typer.Option(
        None,
        "--topology",
        help=f"Preset, Nx<preset>, file; a,b compares (default {DEFAULT_TOPOLOGY}).",
    ),
    "profile": typer.Option(
        None, "--profile", help="Apply a calibration profile (scaleup calibrate --out FILE)."
    ),
    "straggler": typer.Option(
        None,
        "--straggler",
        help="RANK=F: rank RANK is an accelerator F (>= 1) times slower: its thread blocks, HBM "
        "and links at 1/F, its step latencies x F (repeatable; docs/models.md).",
    ),
    "skew_us": typer.Option(
        None,
        "--skew-us",
        help="RANK=US: rank RANK arrives US microseconds late; nothing it takes part in starts "
        "before (repeatable).",
    ),
    "fail_links": typer.Option(
        None,
        "--fail-link",
        help="Remove every link between devices A and B (A-B, ids as topo show lists them); "
        "repeatable.",
    ),
    "degrades": typer.Option(
        None,
        "--degrade",
        help="Multiply the bandwidth of every link between A and B by F (A-B=F, 0 < F <= 1); "
        "repeatable.",
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
    "jobs": typer.Option(
        None,
        "--jobs",
        help="A jobs file (TOML, one job table each): run them together on --topology; per job "
        "its time alone, together and the slowdown (docs/jobs.md).",
    ),
    "exact": typer.Option(
        False,
        "--exact",
        help="Simulate every flow and event (no symmetry classes, no periods skipped): the "
        "reference mode.",
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
    profile: Path | None = _OPTIONS["profile"],
    straggler: list[str] | None = _OPTIONS["straggler"],
    skew_us: list[str] | None = _OPTIONS["skew_us"],
    jobs: Path | None = _OPTIONS["jobs"],
    fail_links: list[str] | None = _OPTIONS["fail_links"],
    degrades: list[str] | None = _OPTIONS["degrades"],
    select: str | None = _OPTIONS["select"],
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
                   explain, exact, os.environ, profile,
                   stragglers=tuple(straggler or ()), skew_us=tuple(skew_us or ()))  # fmt: skip
    flags = replace(flags, fail_links=tuple(fail_links or ()), degrades=tuple(degrades or ()))
    flags = replace(flags, selection=select)
    if json_out and csv_out:
        raise UsageError("choose one of --json and --csv", source="--json/--csv")
    if jobs is not None:
        print_jobs(flags, jobs, json_out, csv_out, plot)
        return
    check_mode(flags)
    stragglers_of(flags)  # a malformed --straggler / --skew-us fails before any work
    request, args = request_from_flags(flags)
    topos: dict[str, Topology] = {}
    if explain:
        run_explain(flags, request, args, (json_out, csv_out, plot))
        return
    if runtime is None:
        series, topos = simulate(flags, request)
    else:
        series = measure(flags, request)
    print_series(series, topos, args, flags, (json_out, csv_out, plot))


def register(app: typer.Typer) -> None:
    """Add the ``bench`` command to the scaleup app."""
    app.command("bench")(bench_cmd)
