"""What a script can check of a matplotlib Figure: its texts, axis labels, tick labels."""

from __future__ import annotations

import re

from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.text import Text


def texts(fig: Figure) -> list[str]:
    """Every visible string of the figure: titles, labels, ticks, annotations, legends."""
    return [t.get_text() for t in fig.findobj(Text) if t.get_visible() and t.get_text()]


def assert_no_none(fig: Figure) -> None:
    """No text of the figure says ``None``."""
    bad = [s for s in texts(fig) if "None" in s]
    assert not bad, bad


def assert_axis_labels(ax: Axes) -> None:
    """Both axis labels are set and name a unit in parentheses (or a bare count)."""
    for label in (ax.get_xlabel(), ax.get_ylabel()):
        assert label.strip(), "empty axis label"
        assert re.search(r"\(.+\)", label), f"no unit in {label!r}"


def assert_ticks_readable(fig: Figure, ax: Axes) -> list[str]:
    """The x tick labels drawn are distinct and do not overlap; returns them."""
    canvas = FigureCanvasAgg(fig) if fig.canvas is None else fig.canvas
    canvas.draw()
    renderer = canvas.get_renderer()  # type: ignore[attr-defined]
    ticks = [t for t in ax.get_xticklabels() if t.get_visible() and t.get_text()]
    (lo, hi) = sorted(ax.get_xlim())
    ticks = [t for t in ticks if lo <= t.get_position()[0] <= hi]
    labels = [t.get_text() for t in ticks]
    assert len(labels) == len(set(labels)), labels
    boxes = sorted((t.get_window_extent(renderer) for t in ticks), key=lambda b: b.x0)
    for a, b in zip(boxes, boxes[1:], strict=False):
        assert a.x1 <= b.x0 + 0.5, f"tick labels overlap: {labels}"
    return labels
