"""``scaleup bench --jobs jobs.toml``: several jobs on one fabric, each alone and all together.

The library part is :mod:`scaleup.workload.jobs`; this module resolves the one topology, refuses
the flags that mean nothing here, and prints one row per job as a rich table (or ``--json`` /
``--csv``): what ran, the tuner's algorithm/protocol/channels, the time alone and together, the
slowdown (together / alone) and busbw both ways.
"""

from __future__ import annotations

from pathlib import Path

from scaleup.cli import render
from scaleup.cli.bench_flags import BenchFlags
from scaleup.cli.bench_run import topologies
from scaleup.errors import UsageError

__all__ = ["COLUMNS", "print_jobs", "ranks_text"]

COLUMNS = (
    "job", "collective", "ranks", "size", "type", "algo", "proto", "ch", "start (us)",
    "alone (us)", "together (us)", "slowdown", "busbw alone", "busbw together",
)  # fmt: skip


def ranks_text(ranks: tuple[int, ...]) -> str:
    """Ranks as ranges, as a jobs file may write them: ``(0, 1, 2, 3, 8)`` -> ``0-3,8``.

    >>> ranks_text((0, 1, 2, 3, 8))
    '0-3,8'
    """
    out: list[str] = []
    start = prev = ranks[0]
    for r in (*ranks[1:], None):
        if r is not None and r == prev + 1:
            prev = r
            continue
        out.append(str(start) if start == prev else f"{start}-{prev}")
        if r is not None:
            start = prev = r
    return ",".join(out)


def print_jobs(
    flags: BenchFlags, path: Path, json_out: bool, csv_out: bool, plot: Path | None
) -> None:
    """Run the jobs file ``path`` on ``--topology`` (one fabric) and print the report."""
    from scaleup.tune import TuneSession
    from scaleup.units import format_bytes
    from scaleup.workload.jobs import jobs_rows, load_jobs

    refused = (
        ("--runtime", flags.runtime), ("--explain", flags.explain), ("--plot", plot),
        ("-g/--ranks", flags.ranks), ("--algo", flags.algo), ("--proto", flags.proto),
        ("--channels", flags.channels), ("--straggler", flags.stragglers or None),
        ("--skew-us", flags.skew_us or None),
    )  # fmt: skip
    for flag, value in refused:
        if value is not None and value is not False:
            raise UsageError(
                f"--jobs takes no {flag}: the jobs file says what each job runs", source=flag
            )
    topos = topologies(flags)
    if len(topos) != 1:
        raise UsageError("--jobs runs on one fabric; give --topology one name", source="--topology")
    ((label, topo),) = topos.items()
    jobs = load_jobs(path, topo)
    with render.activity(f"jobs on {label}"):
        rows = jobs_rows(topo, jobs, session=TuneSession(exact=flags.exact), source=str(path))
    if json_out or csv_out:
        render.print_records(rows, rows, csv_out=csv_out)
        return
    render.print_table(
        COLUMNS,
        [
            (
                r.name,
                r.collective,
                ranks_text(r.ranks),
                format_bytes(r.bytes),
                r.dtype,
                r.algo,
                r.proto,
                r.channels,
                f"{r.start_us:.2f}",
                f"{r.alone_us:.2f}",
                f"{r.together_us:.2f}",
                f"{r.slowdown:.3f}",
                f"{r.busbw_alone_gb_per_s:.2f}",
                f"{r.busbw_together_gb_per_s:.2f}",
            )
            for r in rows
        ],  # fmt: skip
        title=f"{len(rows)} jobs sharing {label} (times in us, busbw in GB/s)",
    )
