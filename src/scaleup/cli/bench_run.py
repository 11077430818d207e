"""Running one ``scaleup bench`` request: simulated per fabric, measured (``--runtime``) or
explained (``--explain``), and printing its rows as nccl-tests' table (or JSON/CSV)."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from scaleup.cli import render
from scaleup.cli.bench_flags import (
    DEFAULT_TOPOLOGY,
    FLAG_OF,
    BenchFlags,
    flag_errors,
    nccl_env_of,
    nccl_header,
    plugin_env,
    plugin_header,
    split_topologies,
    straggler_header,
    stragglers_of,
)
from scaleup.cli.bench_table import (
    SweepArgs,
    footer_lines,
    runtime_header,
    sim_header,
    table_lines,
)
from scaleup.errors import UsageError
from scaleup.report import BenchRow

if TYPE_CHECKING:
    from scaleup.topology.model import Topology
    from scaleup.tune import BenchRequest

__all__ = ["explain", "measure", "print_series", "simulate", "topologies"]


def topologies(flags: BenchFlags) -> dict[str, Topology]:
    """``--topology`` (default dgx-h100) resolved, by label; ``:no-p2p`` with ``--no-p2p``; with
    ``--profile``, the calibration profile's corrections applied to every fabric; with
    ``--fail-link``/``--degrade``, those links failed or degraded in every fabric (the label
    gains ``+fail(A-B)``...)."""
    from scaleup.topology import resolve_topology
    from scaleup.topology.faults import apply_faults, fault_suffix, parse_faults

    labels = split_topologies(flags.topology or DEFAULT_TOPOLOGY)
    topos = [resolve_topology(t) for t in labels]
    faults = parse_faults(flags.fail_links, flags.degrades)
    if faults:
        topos = [apply_faults(t, faults) for t in topos]
        labels = [lab + fault_suffix(faults) for lab in labels]
    if flags.no_p2p:
        topos = [t.with_peer_access(False) for t in topos]
        labels = [f"{lab}:no-p2p" for lab in labels]
    if flags.profile is not None:
        from scaleup.calibrate.profile import apply_profile, load_profile

        profile = load_profile(flags.profile)
        topos = [apply_profile(t, profile) for t in topos]
    if len(set(labels)) != len(labels):
        raise UsageError("--topology lists the same fabric twice", source="--topology")
    return dict(zip(labels, topos, strict=True))


def simulate(
    flags: BenchFlags, request: BenchRequest
) -> tuple[dict[str, list[BenchRow]], dict[str, Topology]]:
    """The simulated rows of every fabric (one tuning session for all), and the fabrics."""
    from scaleup.bench import bench_rows
    from scaleup.tune import TuneSession

    topos = topologies(flags)
    # one session: structures checked once per fabric; stragglers and skew apply to every run
    session = TuneSession(exact=flags.exact, stragglers=stragglers_of(flags))
    bar = render.progress_bar()
    series: dict[str, list[BenchRow]] = {}
    with bar if bar is not None else contextlib.nullcontext(), flag_errors(FLAG_OF):
        for label, topo in topos.items():
            update: Callable[[int, int], None] | None = None
            if bar is not None:
                task = bar.add_task(f"bench {label}", total=None)
                update = lambda done, total, t=task: bar.update(t, completed=done, total=total)  # noqa: E731
            series[label] = bench_rows(topo, request, session=session, progress=update)
    return series, topos


def measure(flags: BenchFlags, request: BenchRequest) -> dict[str, list[BenchRow]]:
    """``--runtime``: the rows measured on this machine's processes, labelled ``runtime-<name>``."""
    from scaleup.bench import runtime_rows

    assert flags.runtime is not None  # noqa: S101 - the caller dispatches on it
    with flag_errors(FLAG_OF):
        rows = runtime_rows(
            request, flags.runtime, iters=flags.iters, warmup=flags.warmup, check=flags.check == 1
        )
    return {f"runtime-{flags.runtime}": rows}


def print_series(
    series: dict[str, list[BenchRow]],
    topos: dict[str, Topology],
    args: SweepArgs,
    flags: BenchFlags,
    output: tuple[bool, bool, Path | None],
) -> None:
    """Print the rows: nccl-tests' headers, table and footer, or JSON/CSV; ``--plot`` first."""
    json_out, csv_out, plot = output
    if plot is not None:
        from scaleup.cli.bench_plot import plot_busbw

        plot_busbw(series, plot)
    applied = nccl_env_of(flags)[0].applied
    all_rows = []
    for label, rows in series.items():
        simulated = label in topos and rows
        plugin = plugin_env(topos[label], rows[0].nranks, applied) if simulated else {}
        value = plugin if json_out else " ".join(f"{k}={v}" for k, v in plugin.items())
        for r in rows:  # the EFA plugin's sizes only where it runs: other output stays as it was
            all_rows.append({**r.to_dict(), "net_plugin_env": value} if plugin else r.to_dict())
    if applied:  # recorded only when set: the default output stays as it was
        note = " ".join(f"{k}={v}" for k, v in applied.items())
        all_rows = [{**row, "nccl_env": dict(applied) if json_out else note} for row in all_rows]
    stragglers = stragglers_of(flags)
    if stragglers is not None:  # recorded only when set, as nccl_env
        all_rows = [{**row, "stragglers": stragglers.describe()} for row in all_rows]
    if json_out or csv_out:
        (render.print_json if json_out else render.print_csv)(all_rows)
        return
    lines: list[str] = []
    for label, rows in series.items():
        if label in topos:
            lines += sim_header(label, topos[label], rows, args)
            lines += plugin_header(flags, topos[label], rows[0].nranks) if rows else []
        else:
            lines.append(runtime_header(label.split("-", 1)[1], rows, args, flags.ranks or 0))
    lines += nccl_header(flags) + straggler_header(flags)
    lines += table_lines(series) + footer_lines(series)
    if plot is not None:
        lines.append(f"# plot written to {plot}")
    for line in lines:
        render.console.print(line, markup=False, highlight=False)


def explain(
    flags: BenchFlags,
    request: BenchRequest,
    args: SweepArgs,
    output: tuple[bool, bool, Path | None],
) -> None:
    """``--explain``: the table, then every size's candidates (or their JSON records)."""
    from scaleup.cli.bench_explain import explain_series, print_explanations

    if output[1]:
        raise UsageError("--explain prints a report; use --json for its data", source="--csv")
    topos = topologies(flags)
    with flag_errors(FLAG_OF):
        series, explained = explain_series(topos, request, stragglers=stragglers_of(flags))
    if not output[0]:
        print_series(series, topos, args, flags, output)
    print_explanations(explained, output[0])
