"""``Nx<preset>:nics=k``: k NICs per server, each shared by consecutive local ranks (issue 12)."""

from __future__ import annotations

from collections import Counter

import pytest

from scaleup.errors import UsageError
from scaleup.topology import resolve_topology
from scaleup.topology.analysis import bisection_gb_per_s
from scaleup.topology.model import NodeKind


def test_four_nics_per_eight_gpus_are_shared_by_gpu_pairs():
    t = resolve_topology("2xdgx-a100:nic=ib-hdr,nics=4")
    assert len(t.nics) == 8
    nics = {d.id for d in t.nics}
    gpus = {d.id for d in t.accelerators}
    pairs: dict[str, set[str]] = {}
    for link in t.links:
        if link.b in nics and link.a in gpus:
            pairs.setdefault(link.b, set()).add(link.a)
    assert pairs["n0.nic0"] == {"n0.g0", "n0.g1"}
    assert pairs["n1.nic3"] == {"n1.g6", "n1.g7"}
    assert Counter(len(v) for v in pairs.values()) == {2: 8}
    # the cut between the two servers is their 4 NICs x 25 GB/s (HDR), half of one per GPU
    assert bisection_gb_per_s(t) == pytest.approx(100.0)
    assert bisection_gb_per_s(resolve_topology("2xdgx-a100:nic=ib-hdr")) == pytest.approx(200.0)
    assert all(d.kind is NodeKind.NIC for d in t.nics)


def test_nics_equal_to_the_accelerators_is_the_default():
    a = resolve_topology("2xdgx-a100:nics=8")
    b = resolve_topology("2xdgx-a100")
    assert sorted(d.id for d in a.devices) == sorted(d.id for d in b.devices)
    assert len(a.links) == len(b.links)


@pytest.mark.parametrize("value", ["3", "0", "-4", "16", "abc", "true", "2.5"])
def test_nics_must_divide_the_accelerators_per_server(value):
    with pytest.raises(UsageError) as info:
        resolve_topology(f"2xdgx-a100:nics={value}")
    text = str(info.value)
    assert "\n" not in text
    assert "nics" in text
    assert "must divide the 8 accelerators per server" in text
