"""``scaleup plan``: does a model fit on a fabric, and what does a training step cost there?"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from scaleup.cli import render
from scaleup.errors import UsageError
from scaleup.units import GB, parse_size
from scaleup.workload.config import ParallelConfig, Precision
from scaleup.workload.memory import MemoryBreakdown
from scaleup.workload.plan import PlanResult, SweepRow, plan, sweep_tp
from scaleup.workload.step import DEFAULT_COMPUTE_EFFICIENCY, StepBreakdown

if TYPE_CHECKING:
    from scaleup.calibrate.profile import Profile
    from scaleup.topology.faults import LinkFault

__all__ = ["plan_cmd", "register"]


def _gb(n_bytes: float) -> str:
    return f"{n_bytes / GB:,.2f}"


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:,.2f}"


def _pct(x: float) -> str:
    return f"{100 * x:.1f}%"


def _print_plan(r: PlanResult) -> None:
    """Print one plan: headline, memory, step-time and collectives tables, then the verdict."""
    render.console.print(_headline(r))
    _memory_table(r.memory)
    _step_table(r.step)
    _collectives_table(r.step)
    render.console.print(
        f"exposed communication {_pct(r.step.exposed_share)} of the step; "
        f"{r.step.tokens_per_s:,.0f} tokens/s; MFU {_pct(r.step.mfu)}"
    )
    render.console.print(("[green]" if r.memory.fits else "[red]") + r.verdict + "[/]")


def _headline(r: PlanResult) -> str:
    """The model, the fabric and the whole parallel configuration, in one line."""
    cfg = r.config
    return (
        f"[bold]{r.model.name}[/] ({r.model.params / 1e9:,.2f}B params"
        + (f", {r.model.active_params / 1e9:,.2f}B active" if r.model.is_moe else "")
        + f") on [bold]{r.topology}[/] ({r.n_available} x {r.accelerator}, "
        f"domain {r.domain_size}): TP {cfg.tp} PP {cfg.pp} DP {cfg.dp} EP {cfg.ep} "
        f"ZeRO {cfg.zero}, SP {'on' if cfg.sp else 'off'}, recompute {cfg.recompute}, "
        f"seq {cfg.seq_len(r.model)}, mbs {cfg.mbs}, gbs {cfg.global_batch} "
        f"({cfg.microbatches} micro-batches), {cfg.n_devices} devices"
    )


def _memory_table(mem: MemoryBreakdown) -> None:
    """Print memory per device by component, against the device's HBM."""
    total = mem.total_bytes
    rows = [
        (name, _gb(value), _pct(value / total) if total else "")
        for name, value in (
            ("weights", mem.params_bytes),
            ("gradients", mem.grads_bytes),
            ("optimizer state", mem.optimizer_bytes),
            ("activations", mem.activations_bytes),
            ("reserved", mem.reserved_bytes),
        )
    ]
    rows += [
        ("total", _gb(total), ""),
        ("HBM per device", _gb(mem.hbm_bytes), ""),
        ("headroom" if mem.fits else "SHORTFALL", _gb(abs(mem.headroom_bytes)), ""),
    ]
    render.print_table(
        ["component", "GB", "share"],
        rows,
        title=f"memory per device (stage {mem.stage}, {mem.params_per_device / 1e9:,.2f}B params)",
    )


def _step_table(step: StepBreakdown) -> None:
    """Print the step time by component: compute, bubble, and each kind of communication."""
    step_s = step.step_time_s
    srows = [
        ("compute (incl. recompute)", _ms(step.compute_s), "", _pct(step.compute_s / step_s)),
        ("pipeline bubble", _ms(step.bubble_s), "", _pct(step.bubble_s / step_s)),
    ]
    for kind in ("tp", "ep", "pp", "dp"):
        if step.comm_s[kind] > 0:
            srows.append(
                (
                    f"{kind.upper()} communication",
                    _ms(step.exposed_s[kind]),
                    _ms(step.comm_s[kind]),
                    _pct(step.exposed_s[kind] / step_s),
                )
            )
    srows.append(("step", _ms(step_s), "", "100.0%"))
    render.print_table(
        ["component", "exposed ms", "simulated ms", "share of step"],
        srows,
        title=f"step time (stage {step.stage}, overlap {step.overlap}, "
        f"compute at {step.compute_efficiency:.0%} of {step.peak_flops / 1e12:,.0f} TFLOP/s)",
    )


def _collectives_table(step: StepBreakdown) -> None:
    """Print the step's collectives (simulated), if it has any."""
    crows = [
        (
            t.call.kind,
            t.call.collective,
            f"{t.call.nbytes / 1e6:,.1f}",
            len(t.call.ranks),
            t.call.count,
            f"{t.time_s * 1e6:,.1f}",
            _ms(t.total_s),
        )
        for t in step.calls
    ]
    if crows:
        render.print_table(
            ["kind", "collective", "MB", "ranks", "calls", "us each", "ms total"],
            crows,
            title="collectives per step (simulated)",
        )


def _sweep_table(series: dict[str, list[SweepRow]]) -> None:
    """One row per TP; one group of columns per topology (A, B, ... named in the title)."""
    names = list(series)
    tags = [chr(ord("A") + i) if len(names) > 1 else "" for i in range(len(names))]
    columns = ["tp"]
    for tag in tags:
        prefix = f"{tag} " if tag else ""
        columns += [
            f"{prefix}dp",
            f"{prefix}GB/dev",
            f"{prefix}fits",
            f"{prefix}step s",
            f"{prefix}exposed",
            f"{prefix}MFU",
        ]
    tps = sorted({row.tp for rows in series.values() for row in rows})
    table = []
    for tp in tps:
        line: list[Any] = [tp]
        for name in names:
            row = next((r for r in series[name] if r.tp == tp), None)
            if row is None or row.result is None:
                line += ["-", "-", "skip", "-", "-", "-"]
                continue
            r = row.result
            line += [
                r.config.dp,
                f"{r.memory.total_bytes / GB:,.1f}",
                "yes" if r.fits else "NO",
                f"{r.step.step_time_s:,.3f}",
                _pct(r.step.exposed_share),
                _pct(r.step.mfu),
            ]
        table.append(line)
    legend = (
        ", ".join(f"{tag} = {name}" for tag, name in zip(tags, names, strict=True))
        if len(names) > 1
        else names[0]
    )
    render.print_table(
        columns, table, title=f"TP sweep on {legend} (devices held: dp = n // (tp*pp))"
    )
    for name in names:
        for row in series[name]:
            if row.skipped:
                render.console.print(f"{name}: tp {row.tp} skipped: {row.skipped}")


_MODEL_OPTION = typer.Option(
    ...,
    "--model",
    "-m",
    help="Catalog model or alias (llama-70b, gpt-3-175b, mixtral-8x7b...).",
)
_TOPOLOGY_OPTION = typer.Option(
    "dgx-h100", "--topology", "-t", help="Preset, Nx<preset> or file; a,b for side by side."
)
_TP_OPTION = typer.Option(1, "--tp", help="Tensor-parallel size.")
_PP_OPTION = typer.Option(1, "--pp", help="Pipeline-parallel stages.")
_DP_OPTION = typer.Option(None, "--dp", help="Data-parallel size (default: fill the topology).")
_EP_OPTION = typer.Option(1, "--ep", help="Expert-parallel size (MoE; carved out of DP).")
_ZERO_OPTION = typer.Option(0, "--zero", help="ZeRO stage 0-3 (shards over DP).")
_SP_OPTION = typer.Option(True, "--sp/--no-sp", help="Sequence parallelism with TP.")
_RECOMPUTE_OPTION = typer.Option("selective", "--recompute", help="none | selective | full.")
_SEQ_OPTION = typer.Option(None, "--seq", help="Sequence length (default: the model's).")
_MBS_OPTION = typer.Option(1, "--mbs", help="Micro-batch size (sequences).")
_GBS_OPTION = typer.Option(
    None, "--gbs", help="Global batch (sequences) (default: mbs*dp; x 4pp with PP)."
)
_VPP_OPTION = typer.Option(1, "--vpp", help="Interleaved (virtual) pipeline stages per device.")
_GRAD_BYTES_OPTION = typer.Option(
    2, "--grad-bytes", help="Bytes per gradient: 2 (bf16, 16 B/param) or 4 (fp32)."
)
_COMPUTE_EFFICIENCY_OPTION = typer.Option(
    DEFAULT_COMPUTE_EFFICIENCY,
    "--compute-efficiency",
    help="Fraction of dense BF16 peak the kernels sustain.",
)
_OVERLAP_OPTION = typer.Option("dp", "--overlap", help="none | dp (DP grads under backward) | all.")
_RESERVE_OPTION = typer.Option("0", "--reserve", help="Memory reserved per device (e.g. 4G).")
_MODEL_FILE_OPTION = typer.Option(
    None, "--model-file", help="Your own models (TOML, same form as the catalog)."
)
_SWEEP_OPTION = typer.Option(
    False, "--sweep-tp", help="Table over TP = 1, 2, 4, ... up to the domain."
)
_PROFILE_OPTION = typer.Option(
    None, "--profile", help="Apply a calibration profile (scaleup calibrate -o FILE)."
)
_FAIL_LINK_OPTION = typer.Option(
    None, "--fail-link", help="Remove every link between devices A and B (A-B); repeatable."
)
_DEGRADE_OPTION = typer.Option(
    None, "--degrade", help="Scale the links between A and B by F (A-B=F, 0 < F <= 1); repeatable."
)
_JSON_OPTION = typer.Option(False, "--json", help="Print JSON instead of tables.")
_CSV_OPTION = typer.Option(
    False, "--csv", help="Print CSV: one row per topology (per TP with --sweep-tp)."
)
_PLOT_OPTION = typer.Option(
    None, "--plot", help="Write a plot (PNG, ...) of the breakdown or sweep."
)


def plan_cmd(
    model: str = _MODEL_OPTION,
    topology: str = _TOPOLOGY_OPTION,
    tp: int = _TP_OPTION,
    pp: int = _PP_OPTION,
    dp: int | None = _DP_OPTION,
    ep: int = _EP_OPTION,
    zero: int = _ZERO_OPTION,
    sp: bool = _SP_OPTION,
    recompute: str = _RECOMPUTE_OPTION,
    seq: int | None = _SEQ_OPTION,
    mbs: int = _MBS_OPTION,
    gbs: int | None = _GBS_OPTION,
    vpp: int = _VPP_OPTION,
    grad_bytes: int = _GRAD_BYTES_OPTION,
    compute_efficiency: float = _COMPUTE_EFFICIENCY_OPTION,
    overlap: str = _OVERLAP_OPTION,
    reserve: str = _RESERVE_OPTION,
    model_file: Path | None = _MODEL_FILE_OPTION,
    sweep: bool = _SWEEP_OPTION,
    profile: Path | None = _PROFILE_OPTION,
    json_out: bool = _JSON_OPTION,
    csv_out: bool = _CSV_OPTION,
    plot: Path | None = _PLOT_OPTION,
    fail_links: list[str] | None = _FAIL_LINK_OPTION,
    degrades: list[str] | None = _DEGRADE_OPTION,
) -> None:
    """Memory per device and training-step time of a model on a fabric (communication simulated)."""
    from scaleup.calibrate.profile import load_profile
    from scaleup.topology.faults import parse_faults

    render.check_one_format(json_out, csv_out)
    if grad_bytes not in (2, 4):
        raise UsageError(f"must be 2 or 4, got {grad_bytes}", source="--grad-bytes")
    names = [n.strip() for n in topology.split(",") if n.strip()]
    if not names:
        raise UsageError("no topology given", source="--topology")
    options: dict[str, Any] = dict(
        compute_efficiency=compute_efficiency,
        overlap=overlap,
        reserved_bytes=float(parse_size(reserve, source="--reserve")),
        model_file=model_file,
    )
    calibration = None if profile is None else load_profile(profile)
    layout = ParallelConfig(  # dp is filled in per topology
        tp=tp,
        pp=pp,
        ep=ep,
        zero=zero,
        sp=sp,
        recompute=recompute,  # type: ignore[arg-type]
        mbs=mbs,
        gbs=gbs,
        seq=seq,
        vpp=vpp,
        precision=Precision(grad_bytes=grad_bytes),
    )
    faults = parse_faults(fail_links, degrades)
    results = _plan_each(
        model, names, layout, dp, sweep=sweep, options=options, profile=calibration,
        faults=faults,
    )  # fmt: skip
    _show(results, names, sweep=sweep, output=(json_out, csv_out), plot=plot)


def _plan_each(
    model: str,
    names: list[str],
    layout: ParallelConfig,
    dp: int | None,
    *,
    sweep: bool,
    options: dict[str, Any],
    profile: Profile | None = None,
    faults: tuple[LinkFault, ...] = (),
) -> dict[str, Any]:
    """Plan ``model`` (or sweep TP) on each named topology; without ``dp``, DP fills it;
    ``faults`` (``--fail-link``/``--degrade``) damage every topology."""
    results: dict[str, Any] = {}
    with render.activity("plan") as step:
        for i, name in enumerate(names):
            step(f"plan {name} ({i + 1}/{len(names)}){' over TP' if sweep else ''}")
            results[name] = _plan_one(
                model,
                name,
                layout,
                dp,
                sweep=sweep,
                options=options,
                profile=profile,
                faults=faults,
            )
    return results


def _plan_one(
    model: str,
    name: str,
    layout: ParallelConfig,
    dp: int | None,
    *,
    sweep: bool,
    options: dict[str, Any],
    profile: Profile | None = None,
    faults: tuple[LinkFault, ...] = (),
) -> Any:
    """Plan (or sweep TP) on one named topology (with the calibration ``profile``, if any, and
    its links damaged by ``faults``)."""
    from scaleup.calibrate.profile import apply_profile
    from scaleup.topology import resolve_topology
    from scaleup.topology.faults import apply_faults

    topo = apply_profile(apply_faults(resolve_topology(name), faults), profile)
    # tp or pp < 1 is refused by ParallelConfig.check, naming the flag; no division by 0 first
    per_replica = max(1, layout.tp * layout.pp)
    n_dp = dp if dp is not None else max(1, len(topo.accelerators) // per_replica)
    cfg = layout.with_(dp=n_dp)
    return sweep_tp(model, topo, cfg, **options) if sweep else plan(model, topo, cfg, **options)


def _show(
    results: dict[str, Any],
    names: list[str],
    *,
    sweep: bool,
    output: tuple[bool, bool],
    plot: Path | None,
) -> None:
    """Write the plot (``--plot``), then print the results as JSON, CSV or tables."""
    json_out, csv_out = output
    if plot is not None:
        from scaleup.cli.plan_plot import plot_plans, plot_sweep  # matplotlib only when plotting

        if sweep:
            plot_sweep(results, plot)
        else:
            plot_plans(results, plot)
    if csv_out:
        if sweep:
            rows = [{"topology": n, **r.to_dict()} for n, rs in results.items() for r in rs]
        else:
            rows = [{"topology": n, **render.flatten(r)} for n, r in results.items()]
        render.print_csv([render.flatten(r) for r in rows])
        return
    if json_out:
        if sweep:
            render.print_json({name: [r.to_dict() for r in rows] for name, rows in results.items()})
        else:
            render.print_json(results[names[0]] if len(names) == 1 else list(results.values()))
        return
    if sweep:
        _sweep_table(results)
    else:
        for r in results.values():
            _print_plan(r)
    if plot is not None:
        render.console.print(f"wrote {plot}")


def register(app: typer.Typer) -> None:
    """Add the ``plan`` command to the scaleup app."""
    app.command("plan")(plan_cmd)
