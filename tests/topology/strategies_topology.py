"""Hypothesis strategies for small valid topologies (imported by the topology tests)."""

from __future__ import annotations

from hypothesis import strategies as st

from scaleup.topology import Device, Link, NodeKind, Topology

_TEXT = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=12)
_IDS = st.from_regex(r"[a-z][a-z0-9_.-]{0,6}", fullmatch=True)
_BANDWIDTH = st.one_of(
    st.none(), st.floats(min_value=0.001, max_value=1e4, allow_nan=False, allow_infinity=False)
)


@st.composite
def topologies(draw: st.DrawFn) -> Topology:
    """A connected mesh of 2-6 H100s (NVLink4) or MI300Xs, optionally behind one NVSwitch."""
    accelerator, tech, budget = draw(
        st.sampled_from([("H100", "nvlink4", 18), ("MI300X", "xgmi-mi300x", 7)])
    )
    n = draw(st.integers(2, 6))
    ids = draw(
        st.lists(_IDS, min_size=n, max_size=n, unique=True).filter(lambda xs: "sw" not in xs)
    )
    nodes = draw(st.lists(st.integers(0, 3), min_size=n, max_size=n))
    devices = [
        Device(i, accelerator, NodeKind.ACCELERATOR, node)
        for i, node in zip(ids, nodes, strict=True)
    ]
    links: list[Link] = []
    if accelerator == "H100" and draw(st.booleans()):
        devices.append(Device("sw", "nvswitch3", NodeKind.SWITCH))
        links += [Link(i, "sw", tech, draw(st.integers(1, 9)), draw(_BANDWIDTH)) for i in ids]
    else:
        per_pair = max(1, budget // (n - 1))
        pairs = [(ids[i], ids[i + 1]) for i in range(n - 1)]  # a path keeps it connected
        pairs += draw(
            st.lists(
                st.sampled_from([(a, b) for a in ids for b in ids if a < b]),
                max_size=4,
                unique=True,
            )
        )
        seen: set[frozenset[str]] = set()
        for a, b in pairs:
            if frozenset((a, b)) not in seen:
                seen.add(frozenset((a, b)))
                links.append(
                    Link(a, b, tech, draw(st.integers(1, per_pair // 2 or 1)), draw(_BANDWIDTH))
                )
    name = draw(_TEXT.filter(bool))
    return Topology(name, devices, links, draw(st.booleans()), draw(_TEXT))
