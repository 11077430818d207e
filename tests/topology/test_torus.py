"""The torus / mesh generator: degrees, diameters and bisections against the k-ary n-cube closed
forms, through the project's analysis functions (the ones ``topo show --json`` reports)."""

from __future__ import annotations

import math

import networkx as nx
import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from scaleup import hardware
from scaleup.errors import TopologyFileError, UsageError
from scaleup.topology import analysis as A
from scaleup.topology.io import dumps, loads
from scaleup.topology.torus import (
    TorusTopology,
    parse_shape,
    torus,
    torus_coords,
    torus_rank,
)

TECH = "nvlink4"  # H100 has 18 links: room for 3 dimensions x 2 directions x 3 links
LINK_GB = hardware.link_tech(TECH).bandwidth_gb_per_s


Case = tuple[tuple[int, ...], tuple[bool, ...], int, TorusTopology]


@st.composite
def tori(draw: st.DrawFn) -> Case:
    """A torus / mesh / mix of 1-3 dimensions of size 1-5, 1-3 links per pair, >= 2 chips."""
    n_dims = draw(st.integers(1, 3))
    dims = tuple(draw(st.lists(st.integers(1, 5), min_size=n_dims, max_size=n_dims)))
    assume(math.prod(dims) >= 2)
    wraps = tuple(draw(st.lists(st.booleans(), min_size=n_dims, max_size=n_dims)))
    lpp = draw(st.integers(1, 3))
    return dims, wraps, lpp, torus(dims, "H100", tech=TECH, wrap=list(wraps), links_per_pair=lpp)


def _undirected(t: object) -> nx.Graph:
    return nx.Graph(t.to_networkx())  # type: ignore[attr-defined]


@given(tori())
def test_degree_of_every_node(case: Case) -> None:
    dims, wraps, lpp, t = case
    links = dict.fromkeys((d.id for d in t.accelerators), 0)
    for x in t.links:
        links[x.a] += x.count
        links[x.b] += x.count
    for r, d in enumerate(t.accelerators):
        c = torus_coords(r, dims)
        want = 0
        for ci, k, w in zip(c, dims, wraps, strict=True):
            if k > 1:
                want += 2 if w else (ci > 0) + (ci < k - 1)
        assert links[d.id] == want * lpp
    g = _undirected(t)
    for r, d in enumerate(t.accelerators):
        c = torus_coords(r, dims)
        neighbours = sum(
            (1 if k == 2 else 2) if w else (ci > 0) + (ci < k - 1)
            for ci, k, w in zip(c, dims, wraps, strict=True)
            if k > 1
        )
        assert g.degree(d.id) == neighbours


@given(tori())
def test_diameter(case: Case) -> None:
    dims, wraps, _, t = case
    want = sum(k // 2 if w else k - 1 for k, w in zip(dims, wraps, strict=True))
    assert A.max_hops(t) == want
    assert nx.diameter(_undirected(t)) == want


@given(
    st.sampled_from([(2, 1), (2, 2), (2, 3), (4, 1), (4, 2), (6, 1), (6, 2), (8, 1), (4, 3)]),
    st.booleans(),
)
def test_bisection_of_k_ary_n_cubes(kn: tuple[int, int], wrap: bool) -> None:
    """k even: 2 k^(n-1) links across the bisection with wraparound, k^(n-1) without."""
    k, n = kn
    t = torus((k,) * n, "H100", tech=TECH, wrap=wrap)
    links = (2 if wrap else 1) * k ** (n - 1)
    value, _exact = A.bisection(t)
    assert value == pytest.approx(links * LINK_GB)
    assert A.summary(t)["bisection_gb_per_s"] == pytest.approx(links * LINK_GB)


def test_coords_round_trip_and_rank_order() -> None:
    dims = (4, 2, 3)
    for r in range(math.prod(dims)):
        assert torus_rank(torus_coords(r, dims), dims) == r
    assert torus_coords(1, dims) == (1, 0, 0)  # dimension 0 fastest


def test_size_two_wrap_doubles_the_pair() -> None:
    t = torus((2,), "H100", tech=TECH)
    assert [(x.a, x.b, x.count) for x in t.links] == [("g0", "g1", 2)]
    assert [(x.a, x.b, x.count) for x in torus((2,), "H100", tech=TECH, wrap=False).links] == [
        ("g0", "g1", 1)
    ]


def test_per_dimension_links_and_names() -> None:
    t = torus((4, 4), "H100", tech=TECH, links_per_pair=[1, 2], wrap=[True, False])
    assert t.name == "torus-mesh-4x4"
    assert sum(x.count for x in t.links) == 16 + 2 * 12


@pytest.mark.parametrize(
    ("kwargs", "source"),
    [
        ({"dims": "4xa"}, "dims"),
        ({"dims": (4, 0)}, "dims"),
        ({"dims": (4, 4), "wrap": [True]}, "wrap"),
        ({"dims": (4, 4), "links_per_pair": 0}, "links_per_pair"),
    ],
)
def test_bad_arguments(kwargs: dict[str, object], source: str) -> None:
    with pytest.raises(UsageError) as info:
        torus(accelerator="H100", tech=TECH, **kwargs)  # type: ignore[arg-type]
    assert info.value.source == source


def test_parse_shape() -> None:
    assert parse_shape("4X4x8") == (4, 4, 8)
    assert parse_shape([2, 2]) == (2, 2)
    with pytest.raises(UsageError):
        parse_shape("")


def test_file_round_trip_keeps_the_grid() -> None:
    t = torus((4, 2), "H100", tech=TECH, wrap=[True, False])
    text = dumps(t)
    assert "torus_dims = [4, 2]\ntorus_wrap = [true, false]\n" in text
    back = loads(text)
    assert isinstance(back, TorusTopology)
    assert back == t
    assert (back.dims, back.wrap) == ((4, 2), (True, False))
    plain = loads(text.replace("torus_dims = [4, 2]\ntorus_wrap = [true, false]\n", ""))
    assert not isinstance(plain, TorusTopology)
    assert plain != t


@pytest.mark.parametrize(
    ("replace", "match"),
    [
        ("torus_dims = [8, 1]", None),  # a valid other reading: 8 in a ring needs g3-g4 etc.
        ("torus_dims = [3, 2]", "exactly 6 accelerators"),
        ("torus_wrap = [true]", "one flag per size"),
    ],
)
def test_file_grid_is_checked(replace: str, match: str | None) -> None:
    text = dumps(torus((4, 2), "H100", tech=TECH, wrap=[True, False]))
    key = replace.split(" = ")[0]
    start = text.index(key)
    text = text[:start] + replace + text[text.index("\n", start) :]
    with pytest.raises(TopologyFileError, match=match or "is not linked"):
        loads(text)
