"""Drawing: a matplotlib Figure with switches distinct from accelerators."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("matplotlib")

from matplotlib.figure import Figure  # noqa: E402

from scaleup.topology import resolve_topology  # noqa: E402
from scaleup.topology.draw import draw_topology, layout  # noqa: E402


@pytest.mark.parametrize("name", ["gb200-nvl72", "2xdgx-h100", "pcie-8"])
def test_draw_distinct_markers(name: str, tmp_path: Path) -> None:
    t = resolve_topology(name)
    fig = draw_topology(t)
    assert isinstance(fig, Figure)
    ax = fig.axes[0]
    labels = [h.get_label() for h in ax.get_legend().legend_handles]
    assert any(lb.startswith("accelerator") for lb in labels)
    assert any(lb.startswith("switch") for lb in labels)
    assert len(ax.collections) >= 3  # links + at least two kinds of markers
    out = tmp_path / "t.png"
    fig.savefig(out)
    assert out.stat().st_size > 1000


def test_layout_places_every_device_once() -> None:
    t = resolve_topology("gb200-nvl72")
    pos = layout(t)
    assert set(pos) == {d.id for d in t.devices}
    assert len(set(pos.values())) == len(pos)
