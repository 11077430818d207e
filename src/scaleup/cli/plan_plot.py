"""``scaleup plan --plot``: step and memory breakdowns, or MFU over TP per topology (Agg).

Configurations that do not fit in memory are marked: their memory bar is hatched and their
name says so (breakdown), or their points are an "x" instead of a dot (TP sweep); either way the
legend has a "does not fit" entry.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from scaleup.cli.plot_axes import new_figure, save_figure
from scaleup.units import GB
from scaleup.workload.plan import PlanResult, SweepRow

__all__ = ["plot_plans", "plot_sweep"]

_STEP_PARTS = ("compute", "pipeline bubble", "TP comm.", "EP comm.", "PP comm.", "DP comm.")
_MEM_PARTS = ("weights", "gradients", "optimizer", "activations", "reserved")
_MISFIT = "does not fit"
#: The ``gid`` of the markers of points that do not fit (for whoever inspects the Figure).
_GID = "does-not-fit"


def _stack(ax: Any, i: int, values: Sequence[float], hatch: str) -> None:
    bottom = 0.0
    for j, value in enumerate(values):
        ax.bar(i, value, bottom=bottom, color=f"C{j}", hatch=hatch, edgecolor="white")
        bottom += value


def _legend(ax: Any, parts: Sequence[str], extra: Sequence[Any] = ()) -> None:
    """Plain colour patches for the parts (whatever hatching the bars have), then ``extra``."""
    from matplotlib.patches import Patch

    handles = [Patch(color=f"C{j}", label=part) for j, part in enumerate(parts)]
    ax.legend(handles=[*handles, *extra], fontsize="small", loc="upper left", ncols=2)
    ax.set_ylim(top=ax.get_ylim()[1] * 1.45)  # room for the legend above the bars


def plot_plans(results: Mapping[str, PlanResult], path: str | Path) -> Any:
    """Stacked bars, one per topology: step time by component and memory per device by component.

    Returns the Figure (also written to ``path``).
    """
    fig = new_figure(11, 4.8)
    ax_t, ax_m = fig.subplots(1, 2)
    labels = []
    for i, (name, r) in enumerate(results.items()):
        s, m = r.step, r.memory
        _stack(
            ax_t,
            i,
            [s.compute_s, s.bubble_s, *(s.exposed_s[k] for k in ("tp", "ep", "pp", "dp"))],
            "",
        )
        memory = [m.params_bytes, m.grads_bytes, m.optimizer_bytes, m.activations_bytes]
        _stack(ax_m, i, [v / GB for v in (*memory, m.reserved_bytes)], "" if r.fits else "//")
        ax_m.hlines(m.hbm_bytes / GB, i - 0.4, i + 0.4, colors="k", linestyles="--")
        labels.append(name if r.fits else f"{name}\n({_MISFIT})")
    for ax, unit in ((ax_t, "step time (s, exposed parts)"), (ax_m, "memory per device (GB)")):
        ax.set_xticks(range(len(labels)), labels)
        ax.set_xlabel("topology (fabric)")
        ax.set_ylabel(unit)
    _legend(ax_t, _STEP_PARTS)
    _legend(ax_m, _MEM_PARTS, _memory_keys(any(not r.fits for r in results.values())))
    first = next(iter(results.values()))
    cfg = first.config
    fig.suptitle(
        f"{first.model.name}: step time and memory, TP {cfg.tp} PP {cfg.pp} DP {cfg.dp}, "
        f"sequence {cfg.seq_len(first.model)} tokens"
    )
    save_figure(fig, path)
    return fig


def _memory_keys(misfit: bool) -> list[Any]:
    """Legend entries for the HBM line and, when a bar is hatched, "does not fit"."""
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    keys: list[Any] = [Line2D([], [], color="k", linestyle="--", label="HBM capacity")]
    if misfit:
        keys.append(Patch(facecolor="white", edgecolor="black", hatch="//", label=_MISFIT))
    return keys


def plot_sweep(series: Mapping[str, Sequence[SweepRow]], path: str | Path) -> Any:
    """MFU and exposed-communication share against TP, one line per topology.

    Points that do not fit in memory are drawn as an "x", the others as dots. Returns the Figure.
    """
    fig = new_figure(11, 4.4)
    ax_mfu, ax_exp = fig.subplots(1, 2)
    model, all_tps, misfit = "", set[int](), False
    for i, (name, rows) in enumerate(series.items()):
        planned = [(r.tp, r.result) for r in rows if r.result is not None]
        if not planned:
            continue
        model = model or planned[0][1].model.name
        all_tps.update(tp for tp, _ in planned)
        for ax, value in ((ax_mfu, "mfu"), (ax_exp, "exposed_share")):
            ys = [100 * getattr(p.step, value) for _, p in planned]
            ax.plot([tp for tp, _ in planned], ys, color=f"C{i}", label=name, zorder=2)
            fit = [(tp, y) for (tp, p), y in zip(planned, ys, strict=True) if p.fits]
            bad = [(tp, y) for (tp, p), y in zip(planned, ys, strict=True) if not p.fits]
            misfit = misfit or bool(bad)
            for points, marker, size, gid in ((fit, "o", 30, "fits"), (bad, "x", 60, _GID)):
                if points:
                    px, py = zip(*points, strict=True)
                    ax.scatter(px, py, marker=marker, s=size, color=f"C{i}", zorder=3, gid=gid)
    for ax, label in ((ax_mfu, "MFU (%)"), (ax_exp, "exposed communication (% of step)")):
        ax.set_xscale("log", base=2)
        ax.set_xticks(sorted(all_tps), [str(t) for t in sorted(all_tps)])
        ax.set_xlabel("tensor-parallel size (accelerators per group)")
        ax.set_ylabel(label)
        ax.grid(True, alpha=0.3)
        _sweep_legend(ax, misfit)
    fig.suptitle(f"{model or 'model'}: MFU and exposed communication by tensor-parallel size")
    save_figure(fig, path)
    return fig


def _sweep_legend(ax: Any, misfit: bool) -> None:
    """The topologies' lines, and a hollow-with-x marker for "does not fit" when there is one."""
    from matplotlib.lines import Line2D

    handles, _ = ax.get_legend_handles_labels()
    if misfit:
        handles.append(
            Line2D(
                [],
                [],
                marker="x",
                color="grey",
                linestyle="",
                label=_MISFIT,
            )
        )
    if handles:
        ax.legend(handles=handles, fontsize="small")
