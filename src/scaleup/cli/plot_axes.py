"""Helpers shared by the plots: figures on Agg, message-size ticks in human units, labels.

A size axis is log base 2 with a labelled tick every few powers of two (``8B 256B 8K 256K 8M``),
at most ``max_ticks`` of them, horizontal so they cannot run into each other, and an unlabelled
minor tick at every power of two.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from scaleup.errors import UsageError
from scaleup.units import format_bytes

__all__ = [
    "SIZE_LABEL",
    "human_label",
    "new_figure",
    "save_figure",
    "set_size_axis",
    "size_ticks",
]

#: The x label of every message-size axis.
SIZE_LABEL = "message size (bytes; K, M, G = 1024, 1024², 1024³)"
_STEPS = (1, 2, 5, 10, 20)  # powers of 1024 are 10 octaves apart


def size_ticks(low: float, high: float, max_ticks: int = 8) -> list[int]:
    """Powers of two from ``low`` to ``high``, evenly spaced down from ``high`` (``max_ticks``).

    >>> [format_bytes(t) for t in size_ticks(8, 8 << 30)]
    ['8B', '256B', '8K', '256K', '8M', '256M', '8G']
    >>> size_ticks(1024, 1024)
    [1024]
    """
    if high < low or high <= 0:
        return []
    first = math.ceil(math.log2(max(low, 1)))
    last = math.floor(math.log2(high))
    span = last - first
    step = next((s for s in _STEPS if span // s + 1 <= max_ticks), max(1, span // max_ticks + 1))
    return [2**k for k in reversed(range(last, first - 1, -step))]  # the largest size labelled


def set_size_axis(axis: Any, sizes: Iterable[float], *, max_ticks: int = 8) -> None:
    """Make ``axis``'s x axis a message-size axis over ``sizes`` (bytes, all > 0)."""
    from matplotlib.ticker import FixedLocator, NullFormatter

    known = [s for s in sizes if s > 0]
    axis.set_xscale("log", base=2)
    if not known:
        return
    ticks = size_ticks(min(known), max(known), max_ticks)
    axis.set_xticks(ticks, [format_bytes(t) for t in ticks])
    low, high = math.floor(math.log2(min(known))), math.ceil(math.log2(max(known)))
    axis.xaxis.set_minor_locator(FixedLocator([2**k for k in range(low, high + 1)]))
    axis.xaxis.set_minor_formatter(NullFormatter())
    axis.set_xlabel(SIZE_LABEL)


def human_label(value: Any, fallback: str = "?") -> str:
    """``str(value)``, except that a missing value reads ``fallback`` (never ``None``)."""
    return fallback if value is None or value == "" else str(value)


def new_figure(width_in: float, height_in: float) -> Any:
    """A Figure on its own Agg canvas (no pyplot, no global backend switch)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    figure = Figure(figsize=(width_in, height_in), dpi=100, layout="constrained")
    FigureCanvasAgg(figure)
    return figure


def save_figure(figure: Any, path: str | Path) -> None:
    """Write ``figure`` (format by suffix); an unwritable path is a one-line :class:`UsageError`."""
    out = Path(path)
    try:
        figure.savefig(out)
    except (OSError, ValueError) as error:
        raise UsageError(f"cannot write the plot: {error}", source=str(out)) from None
