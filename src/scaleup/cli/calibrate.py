"""``scaleup calibrate LOG... --topology T``: fit a profile of model parameters to measured logs.

Reads nccl-tests / rccl-tests output (:mod:`scaleup.calibrate.logs`), fits the scale-up link
efficiency and the launch latency (and, across nodes, the NIC efficiency and the network latency;
:mod:`scaleup.calibrate.fit`), writes the profile TOML (``--out``) and prints the parameters with
their uncertainty and, per size, the error before and after. ``scaleup bench --profile FILE``
applies the profile. A missing, empty or malformed log is one line and exit code 2.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer

from scaleup.cli import render
from scaleup.units import format_bytes

__all__ = ["calibrate_cmd", "register"]

_OPTIONS: dict[str, Any] = {
    "logs": typer.Argument(..., help="nccl-tests / rccl-tests output files (one or more)."),
    "topology": typer.Option(..., "--topology", help="The fabric the logs ran on (preset, file)."),
    "collective": typer.Option(
        None, "--collective", help="The collective (default: the <op>_perf named in the log)."
    ),
    "ranks": typer.Option(None, "-g", "--ranks", help="Ranks (default: the log's # Rank lines)."),
    "out": typer.Option(None, "--out", "-o", help="Write the profile TOML here."),
    "hold_out": typer.Option(
        0, "--hold-out", help="Keep every K-th size out of the fit, to check the profile on it."
    ),
    "max_evals": typer.Option(30, "--max-evals", help="Most evaluations of the fit."),
    "json_out": typer.Option(False, "--json", help="Print the profile and errors as JSON."),
    "csv_out": typer.Option(False, "--csv", help="Print the per-size errors as CSV."),
}


def _pct(value: float) -> str:
    return f"{value * 100:+.1f}%"


def calibrate_cmd(
    logs: list[Path] = _OPTIONS["logs"],
    topology: str = _OPTIONS["topology"],
    collective: str | None = _OPTIONS["collective"],
    ranks: int | None = _OPTIONS["ranks"],
    out: Path | None = _OPTIONS["out"],
    hold_out: int = _OPTIONS["hold_out"],
    max_evals: int = _OPTIONS["max_evals"],
    json_out: bool = _OPTIONS["json_out"],
    csv_out: bool = _OPTIONS["csv_out"],
) -> None:
    """Fit link/NIC efficiency and network/launch latency to nccl-tests logs; save a profile."""
    from scaleup.calibrate import dumps, fit_profile, read_logs
    from scaleup.errors import UsageError
    from scaleup.topology import resolve_topology

    render.check_one_format(json_out, csv_out)
    if max_evals < 1 or hold_out < 0:
        raise UsageError("must be positive", source="--max-evals/--hold-out")
    parsed = read_logs(logs, collective=collective)
    fabric = resolve_topology(topology)
    fit = fit_profile(fabric, parsed, topology_name=topology, ranks=ranks,
                      hold_out_every=hold_out, max_evaluations=max_evals)  # fmt: skip
    if out is not None:
        try:
            out.write_text(dumps(fit.profile), encoding="utf-8")
        except OSError as error:
            raise UsageError(f"cannot write: {error.strerror}", source=str(out)) from None
    if json_out or csv_out:
        points = [e.to_dict() for e in fit.errors]
        render.print_records({"profile": fit.profile.model_dump(), "ranks": fit.ranks,
                              "points": points}, points, csv_out=csv_out)  # fmt: skip
        return
    _print(fit, out)


def _print(fit: Any, out: Path | None) -> None:
    p, sigma = fit.profile, fit.profile.uncertainty
    rows = []
    for name in p.fit.fitted:
        s = getattr(sigma, name)
        rows.append((name, f"{getattr(p, name):.4g}", "undetermined" if s is None else f"{s:.2g}"))
    render.print_table(("parameter", "fitted", "± 1 sigma"), rows,
                       title=f"profile of {p.topology} ({fit.ranks} ranks, {p.fit.points} points, "
                       f"{p.fit.evaluations} evaluations)")  # fmt: skip
    table = [
        (e.point.collective, format_bytes(e.point.size_bytes), f"{e.point.time_us:.2f}",
         f"{e.before_us:.2f}", _pct(e.error_before), f"{e.after_us:.2f}", _pct(e.error_after),
         "held out" if e.held_out else "")
        for e in fit.errors
    ]  # fmt: skip
    render.print_table(
        ("op", "size", "measured us", "before us", "err", "after us", "err", ""),
        table,
        title=f"RMS log error {p.fit.rms_log_error_before:.3f} -> {p.fit.rms_log_error_after:.3f}"
        " (fitted points)",
    )
    if out is not None:
        render.console.print(f"profile written to {out}; apply it: scaleup bench --profile {out}")


def register(app: typer.Typer) -> None:
    """Add the ``calibrate`` command to the scaleup app."""
    app.command("calibrate")(calibrate_cmd)
