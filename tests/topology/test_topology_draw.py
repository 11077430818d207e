"""Drawing: servers as clusters, roles in the legend, link counts shown, big fabrics summarised."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

pytest.importorskip("matplotlib")

from matplotlib.collections import LineCollection  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

from figure_checks import assert_no_none, texts  # noqa: E402
from scaleup.topology import resolve_topology  # noqa: E402
from scaleup.topology.draw import draw_topology, layout  # noqa: E402
from scaleup.topology.draw_layout import place  # noqa: E402


def _legend(fig: Figure) -> list[str]:
    return [t.get_text() for t in fig.axes[0].get_legend().get_texts()]


@pytest.mark.parametrize(
    ("name", "roles"),
    [
        ("gb200-nvl72", ["accelerator", "switch"]),
        ("2xdgx-h100", ["accelerator", "switch", "NIC", "network switch"]),
        ("pcie-8", ["accelerator", "switch", "host"]),
    ],
)
def test_legend_names_every_role(name: str, roles: list[str], tmp_path: Path) -> None:
    fig = draw_topology(resolve_topology(name))
    legend = _legend(fig)
    for role in roles:
        assert any(t.startswith(f"{role}:") for t in legend), (role, legend)
    assert any(" link (" in t and "GB/s" in t for t in legend)
    assert_no_none(fig)
    out = tmp_path / "t.png"
    fig.savefig(out)
    assert out.stat().st_size > 1000


def test_roles_have_distinct_markers() -> None:
    fig = draw_topology(resolve_topology("2xdgx-h100"))
    handles = fig.axes[0].get_legend().legend_handles
    markers = [h.get_marker() for h in handles if h.get_marker() not in (None, "None", "")]
    assert len(markers) == len(set(markers)) == 4


def test_doubled_nvlink_pairs_are_thicker_and_labelled() -> None:
    fig = draw_topology(resolve_topology("dgx1-v100"))
    assert texts(fig).count("x2") == 8  # DGX-1 V100: 8 doubled pairs
    (lines,) = [c for c in fig.axes[0].collections if isinstance(c, LineCollection)]
    widths = set(lines.get_linewidths())
    assert len(widths) == 2


def test_nvswitch_link_counts_labelled() -> None:
    labels = texts(draw_topology(resolve_topology("dgx-h100")))
    assert sorted(s for s in labels if s.endswith("/GPU")) == ["x4/GPU"] * 2 + ["x5/GPU"] * 2


def test_servers_in_a_row_switches_above_network_on_top() -> None:
    t = resolve_topology("4xdgx-h100")
    p = place(t)
    y = {
        role: {p.pos[i][1] for i, r in p.role.items() if r == role} for role in set(p.role.values())
    }
    assert max(y["accelerator"]) < min(y["switch"]) < min(y["NIC"]) < min(y["network switch"])
    spans = [p.servers[n] for n in sorted(p.servers)]
    assert all(a[1] < b[0] for a, b in zip(spans, spans[1:], strict=False))
    for d in t.accelerators:  # each GPU inside its server's span
        x0, x1 = p.servers[d.node]
        assert x0 <= p.pos[d.id][0] <= x1


@pytest.mark.parametrize("name", ["2xdgx-h100", "2xmi300x-8", "2xdgx1-v100"])
def test_nic_uplinks_do_not_cross_accelerators(name: str) -> None:
    t = resolve_topology(name)
    pos = layout(t)
    acc_top = max(pos[d.id][1] for d in t.accelerators)
    assert {pos[d.id][1] for d in t.accelerators} == {acc_top}  # one row: nothing above a GPU
    nics = {d.id for d in t.nics}
    for link in t.links:
        if link.a in nics or link.b in nics:
            (xa, ya), (xb, yb) = pos[link.a], pos[link.b]
            accs = [e for e in (link.a, link.b) if e not in nics]
            if accs and t.device(accs[0]).kind.value == "accelerator":
                assert xa == xb  # straight up from its accelerator
            else:
                assert min(ya, yb) > acc_top


def test_rack_of_72_is_a_row_under_a_crossbar() -> None:
    fig = draw_topology(resolve_topology("gb200-nvl72"))
    words = " ".join(texts(fig))
    assert "crossbar" in words
    assert "18 switches" in words
    pos = layout(resolve_topology("gb200-nvl72"))
    assert len({y for (_, y) in pos.values()}) == 2


def test_layout_places_every_device_once() -> None:
    t = resolve_topology("gb200-nvl72")
    pos = layout(t)
    assert set(pos) == {d.id for d in t.devices}
    assert len(set(pos.values())) == len(pos)


def test_large_fabric_is_summarised_quickly() -> None:
    t = resolve_topology("128xdgx-h100")
    start = time.perf_counter()
    fig = draw_topology(t)
    fig.savefig(Path("/dev/null"), format="png")
    assert time.perf_counter() - start < 20
    assert "summarised" in fig.axes[0].get_title()
    assert_no_none(fig)
