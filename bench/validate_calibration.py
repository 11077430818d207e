"""Regenerate docs/validation.md: every measured row simulated on the preset that models it.

Usage (from the repository root)::

    python bench/validate_calibration.py [MEASURED_CSV] [-o docs/validation.md]

MEASURED_CSV defaults to docs/calibration/measured.csv. Prints the summary figures; exits 1 when a
bound of issue 4 is missed (median busbw error <= 10% at >= 64 MiB, median time error <= 25% at
<= 64 KiB, no system off by more than 25% at >= 64 MiB).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from calibration import compare, load_measured, summarize, to_markdown  # bench/calibration.py

ROOT = Path(__file__).resolve().parents[1]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "csv", nargs="?", default=str(ROOT / "docs" / "calibration" / "measured.csv")
    )
    parser.add_argument("-o", "--output", default=str(ROOT / "docs" / "validation.md"))
    args = parser.parse_args(argv)
    start = time.perf_counter()
    comparisons = compare(load_measured(args.csv))
    summary = summarize(comparisons)
    text = to_markdown(comparisons, summary, command="python bench/validate_calibration.py")
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
    ok = (
        summary.median_busbw_error_big <= 0.10
        and summary.median_time_error_small <= 0.25
        and summary.worst_error_big <= 0.25
    )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
