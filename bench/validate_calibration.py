"""Regenerate docs/validation.md: every measured row simulated on the preset that models it.

Usage (from the repository root)::

    python bench/validate_calibration.py [MEASURED_CSV] [-o docs/validation.md]
    python bench/validate_calibration.py --system "p5" --system "A100"   # a quick subset
    python bench/validate_calibration.py --select nccl-model -o /tmp/v.md  # NCCL's own pick

MEASURED_CSV defaults to docs/calibration/measured.csv. ``--system TEXT`` (repeatable) keeps the
systems whose name contains TEXT (case-insensitive), prints their rows and writes nothing: the
summary of a subset is not the document's.

Without ``--system`` it prints the summary figures; exits 1 when a
bound of issue 4 is missed (median busbw error <= 10% at >= 64 MiB, median time error <= 25% at
<= 64 KiB, no system off by more than 25% at >= 64 MiB).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from calibration import (  # bench/calibration.py
    compare,
    load_measured,
    package_reads_measured,
    summarize,
    to_markdown,
)
from scaleup.tune.request import SELECTIONS

ROOT = Path(__file__).resolve().parents[1]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "csv", nargs="?", default=str(ROOT / "docs" / "calibration" / "measured.csv")
    )
    parser.add_argument("-o", "--output", default=str(ROOT / "docs" / "validation.md"))
    parser.add_argument(
        "--system",
        action="append",
        default=[],
        metavar="TEXT",
        help="only systems whose name contains TEXT (repeatable); print rows, write nothing",
    )
    parser.add_argument(
        "--select",
        choices=SELECTIONS,
        default=None,
        help="how the tuner picks (scaleup bench --select; default: the library's default)",
    )
    args = parser.parse_args(argv)
    start = time.perf_counter()
    if args.system:
        return _subset(args.csv, [t.lower() for t in args.system], start, args.select)
    comparisons = compare(load_measured(args.csv), args.select)
    summary = summarize(comparisons)
    reads = [
        str(Path(x).relative_to(ROOT)) for x in package_reads_measured(ROOT / "src" / "scaleup")
    ]
    text = to_markdown(
        comparisons,
        summary,
        command="python bench/validate_calibration.py",
        reads_measured=reads,
    )
    Path(args.output).write_text(text, encoding="utf-8")
    elapsed = time.perf_counter() - start
    print(f"wrote {args.output} in {elapsed:.1f} s")
    print(
        f"median |busbw error| >= 64 MiB: {summary.median_busbw_error_big * 100:.1f}% "
        f"({summary.n_big} rows)"
    )
    print(
        f"median |time error|  <= 64 KiB: {summary.median_time_error_small * 100:.1f}% "
        f"({summary.n_small} rows)"
    )
    print(
        f"worst system >= 64 MiB: {summary.worst_system_big} {summary.worst_error_big * 100:.1f}%"
    )
    if reads:
        print(f"the library reads the calibration data: {', '.join(reads)}")
    ok = not reads and (
        summary.median_busbw_error_big <= 0.10
        and summary.median_time_error_small <= 0.25
        and summary.worst_error_big <= 0.25
    )
    return 0 if ok else 1


def _subset(csv: str, wanted: list[str], start: float, select: str | None = None) -> int:
    """Simulate the rows of the systems matching ``wanted`` and print them (no document)."""
    rows = [r for r in load_measured(csv) if any(w in r.system.lower() for w in wanted)]
    for c in compare(rows, select):
        if c.sim_time_us is None:
            continue
        size = "(none)" if c.row.bytes is None else str(c.row.bytes)
        busbw = "" if c.busbw_error is None else f"{c.busbw_error * 100:+.1f}%"
        t_err = "" if c.time_error is None else f"{c.time_error * 100:+.1f}%"
        print(
            f"{c.row.system[:40]:40} {c.row.collective:10} {size:>11} "
            f"busbw {c.sim_busbw_gb_per_s or 0:8.2f} {busbw:>8}  time {c.sim_time_us:10.2f} "
            f"{t_err:>8}  {c.sim_algo}/{c.sim_proto}"
        )
    print(f"{len(rows)} rows in {time.perf_counter() - start:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
