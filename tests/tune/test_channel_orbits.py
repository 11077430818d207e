"""Channels built from a server's symmetry (tune.channel_orbits): groups, plans, what they keep.

Known answer worked by hand: a trn2 server is a 4 x 4 torus of Trainium2 chips (rank = 4y + x,
neighbours x +- 1 and y +- 4, mod 4), 160 GB/s a direction per link, a NIC per chip. Its
translations (x, y) -> (x + a, y + b) are 16 automorphisms that move every chip. The depth-first
search packs 16 NIC -> 16 chips -> NIC paths at 40 GB/s (each of the 64 directed links carries 4
paths: 160 / 4 = 40). Under the translations a path's 15 hops load their direction's 16 links
once each per hop, so 16 translates fit at 40 only if the path takes at most 4 hops in each of
the four directions; no Hamiltonian path does (an exhaustive search finds none). Other free
groups of 16 (translations with glide reflections, which turn +x hops of one image into -x hops
of another) spread one path's hops evenly: the plan keeps 16 channels at 40 GB/s, the images of
one base path.
"""

from __future__ import annotations

from collections import Counter

import pytest

from scaleup.topology.presets import resolve_topology
from scaleup.tune import channel_search as cs
from scaleup.tune.channel_orbits import _search, free_groups, orbit_paths
from scaleup.tune.channel_pack import Shape
from scaleup.tune.channel_search import search_rings

GB = 1e9


def _shape(name: str, kind: str = "path") -> Shape:
    topology = resolve_topology(name)
    wiring = cs.Wiring(topology)
    server = wiring.layout(tuple(range(len(topology.accelerators))))[0]
    graph = cs._graph(topology, server, wiring.incident)
    return Shape(graph, kind, cs.MAX_CHANNELS, cs.SEARCH_BUDGET, nics=True)


def _torus_neighbours(r: int) -> set[int]:
    x, y = r % 4, r // 4
    return {(x + 1) % 4 + 4 * y, (x - 1) % 4 + 4 * y, x + 4 * ((y + 1) % 4), x + 4 * ((y - 1) % 4)}


def test_a_trn2_server_has_its_16_translations_as_a_free_group():
    shape = _shape("2xtrn2-16")
    groups = free_groups(shape)
    assert groups
    assert len(groups[0]) == 16
    direct = shape.graph.direct
    for group in groups[:4]:
        assert len(set(group)) == len(group)
        assert tuple(range(16)) in group
        for g in group:
            assert sorted(g) == list(range(16))
            assert all((g[i], g[j]) in direct for i, j in direct)  # an automorphism
            if g != tuple(range(16)):
                assert all(g[i] != i for i in range(16))  # moves every chip
        closed = {tuple(a[i] for i in b) for a in group for b in group}
        assert closed == set(group)  # a group


def _translations() -> tuple[tuple[int, ...], ...]:
    def shift(a: int, b: int) -> tuple[int, ...]:
        return tuple((r % 4 + a) % 4 + 4 * ((r // 4 + b) % 4) for r in range(16))

    return tuple(sorted(shift(a, b) for a in range(4) for b in range(4)))


def test_trn2_rings_are_images_of_one_path_at_the_same_count_and_speed():
    """Two trn2 servers: 16 ring channels at 40 GB/s as before, each a Hamiltonian path of
    direct torus hops per server, every chip entering one channel and leaving one, and the
    server-0 paths the images of one base path under a free group of 16 automorphisms."""
    topology = resolve_topology("2xtrn2-16")
    plan = search_rings(topology)
    assert (plan.n_channels, plan.bandwidth_bytes_per_s) == (16, pytest.approx(40 * GB))
    local = [c.segments[0].ranks for c in plan.channels]
    for path in local:
        assert sorted(path) == list(range(16))
        assert all(b in _torus_neighbours(a) for a, b in zip(path, path[1:], strict=False))
    assert Counter(p[0] for p in local) == Counter(range(16))
    assert Counter(p[-1] for p in local) == Counter(range(16))
    # each directed link carries at most 4 paths: 4 x 40 GB/s = its 160
    hops = Counter((a, b) for p in local for a, b in zip(p, p[1:], strict=False))
    assert max(hops.values()) <= 4
    shape = _shape("2xtrn2-16")
    assert any(
        len(g) == 16 and {tuple(x[i] for i in local[0]) for x in g} == set(local)
        for g in shape.groups
    )


def test_no_translate_of_one_path_fits_a_trn2_server_at_40_gb_per_s():
    """The known answer's premise: the 16 translations are a free group of automorphisms, and
    under them no base path fits at 40 GB/s; under another free group of 16 one does."""
    shape = _shape("2xtrn2-16")
    shifts = _translations()
    direct = shape.graph.direct
    assert all((g[i], g[j]) in direct for g in shifts for i, j in direct)
    assert all(g[i] != i for g in shifts[1:] for i in range(16))
    assert _search(shape, 40 * GB, shifts) == []
    assert len(orbit_paths(shape, 40 * GB)) == 16


def test_full_meshes_and_switched_servers_keep_their_plans():
    """A full mesh has n! automorphisms and its known decompositions; a switched server its
    rotation; a hybrid cube-mesh whose channel count is not its member count keeps the depth-first
    plan: the symmetric plan only replaces one channel per member."""
    assert free_groups(_shape("2xmi300x-8")) == []
    plan = search_rings(resolve_topology("2xdgx-h100"))
    assert [c.segments[0].ranks[0] for c in plan.channels][:8] == list(range(8))
    dgx1 = search_rings(resolve_topology("dgx1-v100"))
    assert (dgx1.n_channels, dgx1.bandwidth_bytes_per_s) == (6, pytest.approx(25 * GB))


def test_the_search_is_deterministic():
    a = search_rings(resolve_topology("2xtrn2-16"))
    b = search_rings(resolve_topology("2xtrn2-16"))
    assert [c.order for c in a.channels] == [c.order for c in b.channels]


def test_rings_only_for_paths_with_nics():
    """Closed rings on one server (no NICs) are not built from orbits."""
    assert orbit_paths(_shape("2xtrn2-16", kind="ring"), 40 * GB) == []
