"""Draw a Topology as a matplotlib Figure (Agg, no pyplot, no global state).

Layout, readable from 2 to a few hundred accelerators: accelerators on the outer circle in rank
order (servers of a multi-node topology as contiguous sectors), their NICs just outside, hosts and
scale-up switches on inner rings within their server's sector, and switches that join servers
(the scale-out fabric) on the innermost ring. Each kind has its own marker and colour; a line's
width grows with the log of its bandwidth.
"""

from __future__ import annotations

import math

from matplotlib.collections import LineCollection
from matplotlib.figure import Figure
from matplotlib.lines import Line2D

from scaleup.topology.model import Device, NodeKind, Topology

__all__ = ["draw_topology", "layout"]

_STYLE = {  # kind -> (marker, colour, ring radius, label)
    NodeKind.ACCELERATOR: ("o", "#1f77b4", 1.0, "accelerator"),
    NodeKind.NIC: ("^", "#9467bd", 1.13, "NIC"),
    NodeKind.HOST: ("D", "#2ca02c", 0.78, "host"),
    NodeKind.SWITCH: ("s", "#ff7f0e", 0.55, "switch"),
}
_GLOBAL_RADIUS = 0.22


def layout(t: Topology) -> dict[str, tuple[float, float]]:
    """Positions ``{device id: (x, y)}`` of the layout described in the module docstring."""
    neighbours: dict[str, set[int]] = {d.id: set() for d in t.devices}
    node_of = {d.id: d.node for d in t.devices}
    for x in t.links:
        neighbours[x.a].add(node_of[x.b])
        neighbours[x.b].add(node_of[x.a])
    nodes = sorted({d.node for d in t.devices})
    sector = {node: i for i, node in enumerate(nodes)}
    width = 2 * math.pi / len(nodes)
    groups: dict[tuple[str, int], list[Device]] = {}
    for d in t.devices:
        spans = d.kind is NodeKind.SWITCH and len(neighbours[d.id]) > 1 and len(nodes) > 1
        key = ("global", 0) if spans else (d.kind.value, d.node)
        groups.setdefault(key, []).append(d)
    pos: dict[str, tuple[float, float]] = {}
    for (kind, node), devices in groups.items():
        if kind == "global":
            radius, start, span = _GLOBAL_RADIUS, 0.0, 2 * math.pi
        else:
            radius, start, span = _STYLE[NodeKind(kind)][2], sector[node] * width, width
        count = len(devices)
        for i, d in enumerate(devices):
            angle = math.pi / 2 - (start + span * (i + 0.5) / count)
            pos[d.id] = (radius * math.cos(angle), radius * math.sin(angle))
    return pos


def draw_topology(t: Topology, *, size_in: float = 9.0, labels: bool | None = None) -> Figure:
    """A Figure of ``t``: distinct markers per kind, link width by bandwidth, a legend.

    ``labels`` defaults to labelling every device up to 40 devices, else accelerators sparsely.
    """
    pos = layout(t)
    fig = Figure(figsize=(size_in, size_in), dpi=110)
    ax = fig.add_subplot(1, 1, 1)
    ax.set_aspect("equal")
    ax.axis("off")
    pairs = t.channels[::2]
    widths = [math.log10(max(c.bandwidth_bytes_per_s, 1e9) / 1e9) + 0.3 for c in pairs]
    scale = 2.0 / max(widths, default=1.0)
    dense = len(pairs) > 400
    segments = [(pos[c.src], pos[c.dst]) for c in pairs]
    ax.add_collection(
        LineCollection(
            segments,
            linewidths=[w * scale for w in widths],
            colors="#555555",
            alpha=0.15 if dense else 0.45,
            zorder=1,
        )
    )
    n_dev = len(t.devices)
    marker_size = max(12.0, min(160.0, 5000.0 / max(n_dev, 1)))
    handles = []
    for kind, (marker, colour, _, label) in _STYLE.items():
        ids = [d.id for d in t.devices if d.kind is kind]
        if not ids:
            continue
        xs, ys = zip(*(pos[i] for i in ids), strict=True)
        size = marker_size * (1.6 if kind is NodeKind.SWITCH else 1.0)
        ax.scatter(
            xs, ys, s=size, marker=marker, c=colour, edgecolors="black", linewidths=0.4, zorder=3
        )
        handles.append(
            Line2D(
                [],
                [],
                marker=marker,
                color=colour,
                linestyle="",
                markeredgecolor="black",
                label=f"{label} ({len(ids)})",
            )
        )
    show = n_dev <= 40 if labels is None else labels
    step = 1 if show else max(1, len(t.accelerators) // 18)
    for d in t.devices:
        sparse = labels is None and d.kind is NodeKind.ACCELERATOR and t.rank(d.id) % step == 0
        if show or sparse:
            x, y = pos[d.id]
            ax.annotate(
                d.id,
                (x, y),
                xytext=(0, 6),
                textcoords="offset points",
                ha="center",
                fontsize=7,
                zorder=4,
            )
    ax.legend(handles=handles, loc="upper right", fontsize=8, frameon=False)
    ax.set_title(
        f"{t.name}: {len(t.accelerators)} accelerators, {len(t.switches)} switches", fontsize=11
    )
    ax.set_xlim(-1.3, 1.3)
    ax.set_ylim(-1.3, 1.3)
    return fig
