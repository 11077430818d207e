"""``scaleup plan --plot``: step and memory breakdowns, or MFU over TP per topology (Agg)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from scaleup.errors import UsageError
from scaleup.units import GB
from scaleup.workload.plan import PlanResult, SweepRow

__all__ = ["plot_plans", "plot_sweep"]

_STEP_PARTS = ("compute", "bubble", "tp", "ep", "pp", "dp")
_MEM_PARTS = ("weights", "gradients", "optimizer", "activations", "reserved")


def _pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _save(fig: Any, path: str | Path, plt: Any) -> Path:
    out = Path(path)
    try:
        fig.tight_layout()
        fig.savefig(out)
    except (OSError, ValueError) as error:
        raise UsageError(f"cannot write the plot: {error}", source=str(out)) from None
    finally:
        plt.close(fig)
    return out


def plot_plans(results: Mapping[str, PlanResult], path: str | Path) -> Path:
    """Stacked bars, one per topology: step time by component and memory per device by component."""
    plt = _pyplot()
    fig, (ax_t, ax_m) = plt.subplots(1, 2, figsize=(11, 4.8), dpi=100)
    labels = list(results)
    for i, name in enumerate(labels):
        r = results[name]
        s = r.step
        parts = [s.compute_s, s.bubble_s, *(s.exposed_s[k] for k in ("tp", "ep", "pp", "dp"))]
        bottom = 0.0
        for j, (part, value) in enumerate(zip(_STEP_PARTS, parts, strict=True)):
            ax_t.bar(i, value, bottom=bottom, color=f"C{j}", label=part if i == 0 else None)
            bottom += value
        m = r.memory
        mparts = [
            m.params_bytes,
            m.grads_bytes,
            m.optimizer_bytes,
            m.activations_bytes,
            m.reserved_bytes,
        ]
        bottom = 0.0
        for j, (part, value) in enumerate(zip(_MEM_PARTS, mparts, strict=True)):
            ax_m.bar(i, value / GB, bottom=bottom, color=f"C{j}", label=part if i == 0 else None)
            bottom += value / GB
        ax_m.hlines(
            m.hbm_bytes / GB,
            i - 0.4,
            i + 0.4,
            colors="k",
            linestyles="--",
            label="HBM" if i == 0 else None,
        )
    first = next(iter(results.values()))
    for ax, unit in ((ax_t, "step time (s, exposed)"), (ax_m, "memory per device (GB)")):
        ax.set_xticks(range(len(labels)), labels)
        ax.set_ylabel(unit)
        ax.legend(fontsize="small")
    cfg = first.config
    fig.suptitle(
        f"{first.model.name}: TP {cfg.tp} PP {cfg.pp} DP {cfg.dp}, seq {cfg.seq_len(first.model)}"
    )
    return _save(fig, path, plt)


def plot_sweep(series: Mapping[str, Sequence[SweepRow]], path: str | Path) -> Path:
    """MFU and exposed-communication share against TP, one line per topology."""
    plt = _pyplot()
    fig, (ax_mfu, ax_exp) = plt.subplots(1, 2, figsize=(11, 4.4), dpi=100)
    model = ""
    all_tps: set[int] = set()
    for name, rows in series.items():
        planned = [(r.tp, r.result) for r in rows if r.result is not None]
        if not planned:
            continue
        model = model or planned[0][1].model.name
        tps = [tp for tp, _ in planned]
        all_tps.update(tps)
        ax_mfu.plot(tps, [100 * p.step.mfu for _, p in planned], marker="o", label=name)
        ax_exp.plot(tps, [100 * p.step.exposed_share for _, p in planned], marker="o", label=name)
        for tp, p in planned:
            if not p.fits:
                ax_mfu.annotate("does not fit", (tp, 100 * p.step.mfu), fontsize="x-small")
    for ax, label in ((ax_mfu, "MFU (%)"), (ax_exp, "exposed communication (% of step)")):
        ax.set_xscale("log", base=2)
        ax.set_xticks(sorted(all_tps), [str(t) for t in sorted(all_tps)])
        ax.set_xlabel("tensor-parallel size")
        ax.set_ylabel(label)
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize="small")
    fig.suptitle(f"{model}: TP sweep")
    return _save(fig, path, plt)
