"""What a script can check of every plot: units, no "None", readable size ticks, misfits marked."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

pytest.importorskip("matplotlib")

from matplotlib.patches import Rectangle  # noqa: E402

from figure_checks import (  # noqa: E402
    assert_axis_labels,
    assert_no_none,
    assert_ticks_readable,
    texts,
)
from scaleup.cli.bench_plot import plot_busbw  # noqa: E402
from scaleup.cli.plan_plot import plot_plans, plot_sweep  # noqa: E402
from scaleup.cli.plot_axes import size_ticks  # noqa: E402
from scaleup.cli.sweep_plots import category_map, heatmap, line_plot  # noqa: E402
from scaleup.report import BenchRow  # noqa: E402
from scaleup.units import format_bytes  # noqa: E402
from scaleup.workload.config import ParallelConfig  # noqa: E402
from scaleup.workload.plan import plan, sweep_tp  # noqa: E402

SIZES = [8 << (2 * k) for k in range(16)]  # 8B, 32B, ..., 8G


def _one_ms(*_args: object, **_kwargs: object) -> float:
    return 1e-3


def _row(topology: str, size: int) -> BenchRow:
    time_us = 5.0 + size / 3e5
    algbw = size / time_us / 1e3
    return BenchRow(
        topology,
        "all_reduce",
        size,
        size // 4,
        "float",
        "sum",
        -1,
        time_us,
        algbw,
        algbw * 1.75,
        None,
        "ring",
        "simple",
        8,
        8,
    )


def test_size_ticks_are_human_and_few() -> None:
    labels = [format_bytes(t) for t in size_ticks(8, 8 << 30)]
    assert labels == ["8B", "256B", "8K", "256K", "8M", "256M", "8G"]
    assert [format_bytes(t) for t in size_ticks(1024, 1 << 30)] == ["1K", "32K", "1M", "32M", "1G"]


def test_bench_plot_8b_to_8g(tmp_path: Path) -> None:
    series = {t: [_row(t, s) for s in SIZES] for t in ("dgx-h100", "mi300x-8")}
    fig = plot_busbw(series, tmp_path / "b.png")
    (ax,) = fig.axes
    assert_axis_labels(ax)
    assert "GB/s" in ax.get_ylabel()
    assert_no_none(fig)
    labels = assert_ticks_readable(fig, ax)
    assert "8G" in labels
    assert all(re.fullmatch(r"\d+[BKMG]", s) for s in labels)
    assert (tmp_path / "b.png").stat().st_size > 5000


def test_report_line_plot_8b_to_8g(tmp_path: Path) -> None:
    rows = {s: {"busbw_gb_per_s": s / 1e8, "time_us": 5 + s / 1e5} for s in [0, *SIZES]}
    fig = line_plot(tmp_path / "l.png", "all_reduce: bus bandwidth", {"dgx-h100": rows})
    for ax in fig.axes:
        assert_axis_labels(ax)
        labels = assert_ticks_readable(fig, ax)
        assert labels[-1] == "8G"
        assert "0B" not in labels  # a 0-byte point has no place on a log axis
    assert_no_none(fig)


def test_report_category_map_ticks(tmp_path: Path) -> None:
    grid = {"dgx-h100": {s: "ring/ll" if s < 1 << 20 else "nvls/simple" for s in SIZES}}
    fig = category_map(tmp_path / "c.png", "fastest", grid)
    (ax,) = fig.axes
    assert assert_ticks_readable(fig, ax)[-1] == "8G"
    assert_no_none(fig)


def _hatched(fig: object) -> list[Rectangle]:
    return [p for ax in fig.axes for p in ax.patches if p.get_hatch()]  # type: ignore[attr-defined]


def test_heatmap_marks_cells_that_do_not_fit(tmp_path: Path) -> None:
    values = {("dgx-h100", 1): 2.0, ("dgx-h100", 8): 0.5}
    fig = heatmap(
        tmp_path / "h.png",
        "memory",
        ["dgx-h100"],
        [1, 8],
        values,
        "memory / HBM (1 = full)",
        ".2g",
        "RdYlGn_r",
        infeasible={("dgx-h100", 1)},
    )
    assert len(_hatched(fig)) == 1
    assert "does not fit" in texts(fig)
    assert_no_none(fig)


def test_plan_plots_mark_what_does_not_fit(tmp_path: Path) -> None:
    results = {t: plan("llama-70b", t, tp=8, comm_time=_one_ms) for t in ("dgx-h100", "mi300x-8")}
    assert [r.fits for r in results.values()] == [False, True]
    fig = plot_plans(results, tmp_path / "p.png")
    assert "does not fit" in texts(fig)
    assert any("dgx-h100" in s and "does not fit" in s for s in texts(fig))
    assert _hatched(fig)
    for ax in fig.axes:
        assert_axis_labels(ax)
    assert_no_none(fig)


def test_plan_sweep_marks_points_that_do_not_fit(tmp_path: Path) -> None:
    eight = ParallelConfig(dp=8)  # 8 devices held, TP = 1, 2, 4, 8
    series = {
        t: sweep_tp("llama-70b", t, eight, comm_time=_one_ms) for t in ("dgx-h100", "mi300x-8")
    }
    fig = plot_sweep(series, tmp_path / "s.png")
    for ax in fig.axes:
        assert_axis_labels(ax)
        legend = [t.get_text() for t in ax.get_legend().get_texts()]
        assert "does not fit" in legend
        gids = [c.get_gid() for c in ax.collections]
        assert gids.count("does-not-fit") == 2  # both topologies have TPs that do not fit
        assert "fits" in gids
    assert_no_none(fig)
