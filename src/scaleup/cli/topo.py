"""``scaleup topo``: list the presets, show a fabric's facts, draw it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer

from scaleup.cli import render
from scaleup.errors import UsageError

__all__ = ["register", "topo_app"]

topo_app = typer.Typer(
    help="Fabric topologies: presets, files, facts and drawings.", no_args_is_help=True
)

_TOPOLOGY_ARG = typer.Argument(
    ..., metavar="NAME|FILE", help="Preset (name[:k=v,...], Nx<preset>) or .toml file."
)


_OUTPUT_OPT = typer.Option(..., "-o", "--output", help="Image file to write (.png, .svg, .pdf).")


_CSV_OPT = typer.Option(False, "--csv", help="Print CSV instead of a table.")


@topo_app.command("list")
def list_cmd(
    json_out: bool = typer.Option(False, "--json", help="Print JSON instead of a table."),
    csv_out: bool = _CSV_OPT,
) -> None:
    """List the topology presets, one line each."""
    from scaleup.topology import list_presets

    render.check_one_format(json_out, csv_out)
    presets = list_presets()
    if json_out or csv_out:
        records = [{"name": k, "description": v} for k, v in presets.items()]
        render.print_records(records, records, csv_out=csv_out)
        return
    render.print_table(
        ["preset", "description"],
        list(presets.items()),
        title="topology presets",
        right_align=False,
    )


@topo_app.command("show")
def show_cmd(
    topology: str = _TOPOLOGY_ARG,
    json_out: bool = typer.Option(False, "--json", help="Print JSON instead of a table."),
    csv_out: bool = typer.Option(
        False, "--csv", help="Print the facts as one CSV row (with --pairs: the pairs table)."
    ),
    pairs: bool = typer.Option(
        False, "--pairs", help="Also list hops and bottleneck per accelerator pair."
    ),
) -> None:
    """Show a topology's facts: size, bandwidth per accelerator, bisection, uniformity, memory.

    Devices are counted by type, never listed; beyond 256 accelerators hops and uniformity come
    from 16 sampled source ranks, and ``--pairs`` stops at 1,024 accelerators.
    """
    from scaleup.topology import analysis, resolve_topology

    render.check_one_format(json_out, csv_out)
    t = resolve_topology(topology)
    table = analysis.pair_table(t) if pairs else None  # refused before the summary's work
    facts = analysis.summary(t)
    if json_out or csv_out:
        data = {**facts, "pairs": table} if pairs else facts
        render.print_records(data, table if table is not None else [facts], csv_out=csv_out)
        return
    sampled = f" (from {facts['hop_sources']} sampled ranks)" if facts["pairs_sampled"] else ""
    rows = [
        ("name", facts["name"]),
        ("description", facts["description"]),
        ("accelerators", f"{facts['accelerators']} x {', '.join(facts['accelerator_types'])}"),
        ("switches / hosts / NICs", f"{facts['switches']} / {facts['hosts']} / {facts['nics']}"),
        ("devices by type", ", ".join(f"{n} {k}" for k, n in facts["device_types"].items())),
        ("servers x ranks per server", f"{facts['nodes']} x {facts['ranks_per_node']}"),
        ("physical links (channels)", f"{facts['links']} ({facts['channels']})"),
        ("per-accelerator GB/s (per direction)", f"{facts['per_accelerator_gb_per_s']:.1f}"),
        (
            "bisection GB/s (per direction)",
            f"{facts['bisection_gb_per_s']:.1f}"
            + ("" if facts["bisection_exact"] else " (structured-cut bound)"),
        ),
        ("uniform", ("yes" if facts["uniform"] else "no") + sampled),
        ("max hops between accelerators", f"{facts['max_hops']}{sampled}"),
        ("pooled memory GB", f"{facts['pooled_memory_bytes'] / 1e9:,.0f}"),
        ("peer access", "yes" if facts["peer_access"] else "no"),
    ]
    if facts["scale_out"] is not None:
        rows.append(("scale-out fabric", _fabric_text(facts["scale_out"])))
    render.print_table(["property", "value"], rows, title=f"topology {t.name}", right_align=False)
    if table is not None:
        render.print_table(
            ["a", "b", "hops", "bottleneck GB/s"],
            [(r["a"], r["b"], r["hops"], f"{r['bottleneck_gb_per_s']:.1f}") for r in table],
            title="accelerator pairs",
        )


def _fabric_text(fabric: dict[str, Any]) -> str:
    """``3 tiers of ib-switch (512 / 512 / 256), leaves 1:1``."""
    tiers = fabric["tiers"]
    counts = " / ".join(str(n) for n in fabric["switches_per_tier"])
    ratio = f", leaves {fabric['oversubscription']:g}:1" if tiers > 1 else ""
    kinds = ", ".join(fabric["switch_types"])
    return f"{tiers} tier{'s' if tiers > 1 else ''} of {kinds} ({counts}){ratio}"


@topo_app.command("draw")
def draw_cmd(
    topology: str = _TOPOLOGY_ARG,
    output: Path = _OUTPUT_OPT,
) -> None:
    """Draw a topology to an image file: servers as clusters, switches above, link counts.

    Beyond 2,500 links the drawing is summarised (uplinks bundled per server), as its title says.
    """
    from scaleup.topology import resolve_topology
    from scaleup.topology.draw import draw_topology  # noqa: PLC0415 - matplotlib only when drawing

    t = resolve_topology(topology)
    figure = draw_topology(t)
    try:
        figure.savefig(output, bbox_inches="tight")
    except (OSError, ValueError) as error:
        raise UsageError(f"cannot write the image: {error}", source=str(output)) from None
    render.console.print(f"wrote {output}")


def register(app: typer.Typer) -> None:
    """Add the ``topo`` command group to the scaleup app."""
    app.add_typer(topo_app, name="topo")
