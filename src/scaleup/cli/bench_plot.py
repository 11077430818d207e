"""``scaleup bench --plot``: busbw against message size, one line per topology (matplotlib, Agg)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from scaleup.errors import UsageError
from scaleup.report import BenchRow
from scaleup.units import format_bytes

__all__ = ["plot_busbw"]


def plot_busbw(
    series: Mapping[str, Sequence[BenchRow]], path: str | Path, *, title: str | None = None
) -> Path:
    """Write a PNG (or any matplotlib format, by suffix) of busbw vs size, log x axis.

    Parameters
    ----------
    series
        ``{label: rows}``; one line per label.
    path
        Output file.
    title
        Figure title (default: the collective of the first row).
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out = Path(path)
    fig, ax = plt.subplots(figsize=(8, 4.8), dpi=100)
    try:
        collective = ""
        for label, rows in series.items():
            points = [(r.bytes, r.busbw_gb_per_s) for r in rows if r.bytes > 0]
            if not points:
                continue
            collective = collective or rows[0].collective
            xs, ys = zip(*points, strict=True)
            ax.plot(xs, ys, marker="o", markersize=3, label=label)
        ax.set_xscale("log", base=2)
        ticks = [
            t for t in (2**k for k in range(0, 44, 4)) if ax.get_xlim()[0] <= t <= ax.get_xlim()[1]
        ]
        if ticks:
            ax.set_xticks(ticks, [format_bytes(t) for t in ticks])
        ax.set_xlabel("message size (bytes)")
        ax.set_ylabel("busbw (GB/s, nccl-tests factors)")
        ax.set_title(title or f"{collective or 'collective'}: simulated bus bandwidth")
        ax.grid(True, which="major", alpha=0.3)
        ax.legend(loc="upper left")
        try:
            fig.savefig(out, bbox_inches="tight")
        except (OSError, ValueError) as error:
            raise UsageError(f"cannot write plot: {error}", source=str(out)) from error
    finally:
        plt.close(fig)
    return out
