"""Draw a Topology as a matplotlib Figure (Agg, no pyplot, no global state).

The layout (:mod:`scaleup.topology.draw_layout`) puts servers as clusters in a row, their
switches above their accelerators and network switches on top. Each role has its own marker
and colour; each link technology its colour; a line's width grows with the link's total
bandwidth (count x per-link), and parallel links are labelled with their count (``x2``, or
``5 links/GPU`` on a switch whose accelerator links all have the same count). Beyond
``max_links`` links only the first servers' links are drawn, and the title says so.
"""

from __future__ import annotations

import math
from collections import defaultdict

from matplotlib.axes import Axes
from matplotlib.collections import LineCollection
from matplotlib.figure import Figure
from matplotlib.lines import Line2D

from scaleup import hardware
from scaleup.topology.draw_layout import ROLES, Placement, place
from scaleup.topology.model import Link, Topology

__all__ = ["draw_topology", "layout"]

_STYLE = {  # role -> (marker, colour, size factor)
    "accelerator": ("o", "#1f77b4", 1.0),
    "switch": ("s", "#ff7f0e", 1.5),
    "host": ("D", "#2ca02c", 1.2),
    "NIC": ("^", "#9467bd", 0.9),
    "network switch": ("h", "#d62728", 1.8),
}
_FAMILY_COLOUR = {
    "nvlink": "#4c4c4c",
    "xgmi": "#4c4c4c",
    "ualink": "#4c4c4c",
    "pcie": "#2ca02c",
    "infiniband": "#9467bd",
    "ethernet": "#9467bd",
}
_MAX_COUNT_LABELS = 16
#: The height of the arc drawn between two devices of the same row, at most (data units).
_ARC = 1.2
#: A server's accelerator-switch crossbar with more links than this is drawn as a bus.
_BUS_LINKS = 200


def _colour(tech: str) -> str:
    return _FAMILY_COLOUR.get(str(hardware.link_tech(tech).family), "#8c564b")


def layout(t: Topology) -> dict[str, tuple[float, float]]:
    """Positions ``{device id: (x, y)}`` of the drawing."""
    return place(t).pos


def _link_gb_per_s(link: Link) -> float:
    per_link = link.bandwidth_gb_per_s or hardware.link_tech(link.tech).bandwidth_gb_per_s
    return float(per_link) * link.count


def _chosen_links(t: Topology, p: Placement, max_links: int) -> tuple[list[Link], int]:
    """The links drawn, and how many servers have their inside links drawn.

    Up to ``max_links`` links, all are. Beyond, the uplinks to network switches are bundled,
    one line per (server, switch) with the summed count, and the links inside servers are
    drawn for the first server only (as a sample).
    """
    if len(t.links) <= max_links:
        return list(t.links), len(p.servers)
    node = {d.id: d.node for d in t.devices}
    inside: dict[int, list[Link]] = defaultdict(list)
    bundles: dict[tuple[int, str, str], int] = defaultdict(int)
    chosen: list[Link] = []
    for link in t.links:
        net = [e for e in (link.a, link.b) if p.role[e] == "network switch"]
        if len(net) == 2:
            chosen.append(link)
        elif net:
            other = link.b if net[0] == link.a else link.a
            bundles[(node[other], net[0], link.tech)] += link.count
        else:
            inside[node[link.a]].append(link)
    top = max(y for i, (_, y) in p.pos.items() if p.role[i] != "network switch")
    for (server, switch, tech), count in bundles.items():
        anchor = f"server {server} uplinks"
        if anchor not in p.pos:
            x0, x1 = p.servers[server]
            p.pos[anchor], p.role[anchor] = ((x0 + x1) / 2, top), "bundle"
        chosen.append(Link(anchor, switch, tech, count))
    first = min(inside, default=0)
    chosen += inside.get(first, [])
    return chosen, 1


def _buses(links: list[Link], p: Placement) -> tuple[list[Link], list[list[Link]]]:
    """Split off each server's full accelerator-switch crossbar above ``_BUS_LINKS`` links."""
    crossbars: dict[float, list[Link]] = defaultdict(list)
    for link in links:
        roles = {p.role[link.a], p.role[link.b]}
        if roles == {"accelerator", "switch"}:
            crossbars[_server_of(link, p)].append(link)
    buses = []
    for group in crossbars.values():
        ends = {e for x in group for e in (x.a, x.b)}
        accs = sum(p.role[e] == "accelerator" for e in ends)
        pairs = {(x.a, x.b) for x in group}
        if len(group) > _BUS_LINKS and len(pairs) == accs * (len(ends) - accs):
            buses.append(group)
    drawn = {id(x) for group in buses for x in group}
    return [x for x in links if id(x) not in drawn], buses


def _server_of(link: Link, p: Placement) -> float:
    """The x where the link's server starts (servers are disjoint x spans)."""
    x = p.pos[link.a][0]
    return next((x0 for x0, x1 in p.servers.values() if x0 - 0.5 <= x <= x1 + 0.5), x)


def _draw_bus(ax: Axes, group: list[Link], p: Placement) -> None:
    """A crossbar as a bar with a stub per device, labelled with what every link is."""
    ends = sorted({e for x in group for e in (x.a, x.b)}, key=lambda e: p.pos[e])
    accs = [e for e in ends if p.role[e] == "accelerator"]
    switches = len(ends) - len(accs)
    ys = {p.pos[e][1] for e in ends}
    y_bus = (min(ys) + max(ys)) / 2
    xs = [p.pos[e][0] for e in ends]
    segments = [(p.pos[e], (p.pos[e][0], y_bus)) for e in ends]
    colour = _colour(group[0].tech)
    ax.add_collection(LineCollection(segments, linewidths=0.8, colors=colour, alpha=0.6, zorder=1))
    ax.plot([min(xs), max(xs)], [y_bus, y_bus], color=colour, linewidth=5, alpha=0.8, zorder=2)
    counts = sorted({x.count for x in group})
    per_gpu = sum(_link_gb_per_s(x) for x in group) / len(accs)
    text = (
        f"crossbar: every accelerator has {'/'.join(map(str, counts))} x {group[0].tech} "
        f"to each of {switches} switches ({per_gpu:g} GB/s per accelerator)"
    )
    ax.text(
        (min(xs) + max(xs)) / 2,
        y_bus,
        text,
        ha="center",
        va="center",
        fontsize=8,
        zorder=5,
        bbox={"boxstyle": "round,pad=0.3", "fc": "white", "ec": colour},
    )


def _path(
    a: tuple[float, float], b: tuple[float, float], *, below: bool = False
) -> list[tuple[float, float]]:
    """A straight segment, or an arc for two devices in the same row (so a link between
    switches or hosts does not run along, and hide, its row); accelerators' arcs go below."""
    (xa, ya), (xb, yb) = a, b
    if ya != yb:
        return [a, b]
    height = min(_ARC, 0.25 + 0.12 * abs(xb - xa)) * (-1 if below else 1)
    steps = [i / 16 for i in range(17)]
    return [(xa + (xb - xa) * u, ya + 4 * height * u * (1 - u)) for u in steps]


def _draw_links(ax: Axes, links: list[Link], p: Placement) -> None:
    """Lines coloured by technology scope, width by total bandwidth; the technology legend."""
    totals = [_link_gb_per_s(x) for x in links]
    low, high = min(totals, default=1.0), max(totals, default=1.0)
    spread = math.log(high / low) if high > low else 1.0
    dense = len(links) > 300
    segments, widths, colours = [], [], []
    for link, total in zip(links, totals, strict=True):
        segments.append(_path(p.pos[link.a], p.pos[link.b], below=_below(link, p)))
        widths.append(0.5 + 2.5 * math.log(total / low) / spread if high > low else 1.2)
        colours.append(_colour(link.tech))
    alpha = 0.2 if dense else 0.6
    ax.add_collection(
        LineCollection(segments, linewidths=widths, colors=colours, alpha=alpha, zorder=1)
    )


def _room(ids: set[str], p: Placement, px_per_unit: float) -> bool:
    """Whether labels ~45 px wide fit between the devices ``ids`` in each row."""
    rows: dict[float, list[float]] = defaultdict(list)
    for i in ids:
        rows[p.pos[i][1]].append(p.pos[i][0])
    gaps = [b - a for xs in rows.values() for a, b in zip(sorted(xs), sorted(xs)[1:], strict=False)]
    return min(gaps, default=math.inf) * px_per_unit >= 45


def _count_labels(ax: Axes, links: list[Link], p: Placement, px_per_unit: float) -> set[str]:
    """Label parallel links: per switch when uniform ("5 links/GPU"), else ``xN`` at midpoints."""
    per_switch: dict[str, set[int]] = defaultdict(set)
    for link in links:
        for a, b in ((link.a, link.b), (link.b, link.a)):
            if p.role[a] in ("switch", "network switch") and p.role[b] == "accelerator":
                per_switch[a].add(link.count)
    uniform = {s for s, counts in per_switch.items() if len(counts) == 1}
    for s in uniform if _room(uniform, p, px_per_unit) else ():
        (count,) = per_switch[s]
        if count > 1:
            x, y = p.pos[s]
            text = f"x{count}/GPU"
            ax.annotate(
                text,
                (x, y),
                xytext=(0, -14),
                textcoords="offset points",
                ha="center",
                fontsize=7,
                color="#333333",
                zorder=5,
                bbox={"boxstyle": "round,pad=0.1", "fc": "white", "ec": "none", "alpha": 0.8},
            )
    rest = [x for x in links if x.count > 1 and x.a not in uniform and x.b not in uniform]
    if len(rest) <= _MAX_COUNT_LABELS:
        for link in rest:
            x, y = _label_at(link, p)
            ax.text(
                x,
                y,
                f"x{link.count}",
                fontsize=7,
                ha="center",
                va="center",
                zorder=5,
                bbox={"boxstyle": "round,pad=0.1", "fc": "white", "ec": "none", "alpha": 0.8},
            )
    return uniform


def _label_at(link: Link, p: Placement) -> tuple[float, float]:
    """Where a link's count goes: the top (or bottom) of its arc, else 40% along the line."""
    path = _path(p.pos[link.a], p.pos[link.b], below=_below(link, p))
    if len(path) > 2:
        return path[len(path) // 2]
    (xa, ya), (xb, yb) = path
    return xa + 0.4 * (xb - xa), ya + 0.4 * (yb - ya)


def _below(link: Link, p: Placement) -> bool:
    """Whether a link joins two accelerators (its arc, if any, goes below their row)."""
    return p.role[link.a] == p.role[link.b] == "accelerator"


def _draw_devices(ax: Axes, t: Topology, p: Placement, marker_size: float) -> list[Line2D]:
    """One scatter per role; the legend handles ``role: n x type``."""
    handles = []
    for role in ROLES:
        devices = [d for d in t.devices if p.role[d.id] == role]
        if not devices:
            continue
        marker, colour, factor = _STYLE[role]
        xs, ys = zip(*(p.pos[d.id] for d in devices), strict=True)
        ax.scatter(
            xs,
            ys,
            s=marker_size * factor,
            marker=marker,
            c=colour,
            edgecolors="black",
            linewidths=0.4,
            zorder=3,
        )
        types: dict[str, int] = defaultdict(int)
        for d in devices:
            types[d.type] += 1
        what = ", ".join(f"{n} x {k}" for k, n in types.items())
        handles.append(
            Line2D(
                [],
                [],
                marker=marker,
                color=colour,
                linestyle="",
                markeredgecolor="black",
                label=f"{role}: {what}",
            )
        )
    return handles


def _tech_handles(links: list[Link]) -> list[Line2D]:
    """One legend line per link technology; a note on widths where bundles differ in size."""
    techs = sorted({x.tech for x in links})
    most = max((x.count for x in links), default=1)
    note = [Line2D([], [], color="none", label=f"wider line: more links (up to x{most})")]
    return [
        Line2D(
            [],
            [],
            color=_colour(k),
            label=f"{k} link ({hardware.link_tech(k).bandwidth_gb_per_s:g} GB/s each)",
        )
        for k in techs
    ] + (note if len({x.count for x in links}) > 1 else [])


def _plural(n: int, noun: str) -> str:
    return f"{n} {noun}" + ("" if n == 1 else "es" if noun.endswith("h") else "s")


def _device_labels(ax: Axes, t: Topology, p: Placement, labels: bool | None) -> None:
    """Every device id up to 48 devices; else the servers' names under their clusters."""
    many_servers = len(p.servers) > 1
    if labels if labels is not None else len(t.devices) <= 48:
        for d in t.devices:
            if p.role[d.id] == "NIC" and many_servers:
                continue
            x, y = p.pos[d.id]
            prefix = f"n{d.node}."
            short = d.id[len(prefix) :] if many_servers and d.id.startswith(prefix) else d.id
            ax.annotate(
                short,
                (x, y),
                xytext=(0, 7),
                textcoords="offset points",
                ha="center",
                fontsize=6.5,
                zorder=4,
            )
    if many_servers:
        step = max(1, len(p.servers) // 16)
        mesh = any(p.role[x.a] == p.role[x.b] == "accelerator" for x in t.links)
        y = min(y for _, y in p.pos.values()) - 0.9 - (_ARC if mesh else 0.0)
        for i, (node, (x0, x1)) in enumerate(sorted(p.servers.items())):
            if i % step == 0:
                ax.text((x0 + x1) / 2, y, f"server {node}", ha="center", va="top", fontsize=7)


def draw_topology(
    t: Topology, *, size_in: float | None = None, labels: bool | None = None, max_links: int = 2500
) -> Figure:
    """A Figure of ``t``: servers as clusters, a legend of device roles and link technologies.

    ``labels`` defaults to labelling every device up to 48 devices. Beyond ``max_links`` links,
    only the first servers' links are drawn (every device still is), and the title says so.
    """
    p = place(t)
    links, shown = _chosen_links(t, p, max_links)
    width_in = size_in or min(18.0, max(8.0, 3.0 + 0.16 * p.width))
    ys = [y for _, y in p.pos.values()]
    height_in = min(9.0, max(4.5, 2.5 + 0.55 * (max(ys) - min(ys))))
    fig = Figure(figsize=(width_in, height_in), dpi=110)
    ax = fig.add_subplot(1, 1, 1)
    ax.axis("off")
    lines, buses = _buses(links, p)
    _draw_links(ax, lines, p)
    for group in buses:
        _draw_bus(ax, group, p)
    _count_labels(ax, lines, p, width_in * 110 * 0.8 / p.width)
    marker_size = max(10.0, min(140.0, 9000.0 / max(p.width, 1.0)))
    handles = _draw_devices(ax, t, p, marker_size) + _tech_handles(list(t.links))
    _device_labels(ax, t, p, labels)
    ax.legend(
        handles=handles, loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=8, frameon=False
    )
    title = f"{t.name}: {len(t.accelerators)} accelerators"
    if len(p.servers) > 1:
        title += f" in {len(p.servers)} servers"
    title += f", {_plural(len(t.switches), 'switch')}" if t.switches else ""
    title += f", {len(t.links)} links"
    if shown < len(p.servers):
        title += (
            f"\n(summarised: uplinks bundled per server and switch; links inside a server "
            f"drawn for server 0 only, of {len(p.servers)})"
        )
    ax.set_title(title, fontsize=11)
    ax.margins(0.04, 0.12)
    ax.autoscale_view()
    return fig
