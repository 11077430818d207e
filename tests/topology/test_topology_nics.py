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


def test_nvl4_partitions_ring_bound_by_their_nics() -> None:
    """Three racks' 4-GPU NVLink partitions joined by one NDR NIC per GPU (nccl #1801's NVL4
    case), NVLS off: every ring channel leaves each partition once, so the ring's busbw is at
    most the partition's 4 NICs x 50 GB/s = 200 GB/s; the simulated ring reaches over 90% of it,
    and the tree (a chain inside each partition, the network crossed once per partition and
    direction) beats it, as the measurements do (196.7 ring, 234.4 tree)."""
    from scaleup.bench import bench_rows
    from scaleup.tune import BenchRequest

    spec = "3xgb200-nvl72:gpus=4,nic=ib-ndr"
    size = 16 << 30
    ring = bench_rows(spec, BenchRequest(sizes_bytes=(size,), algorithm="ring"))[0]
    tree = bench_rows(spec, BenchRequest(sizes_bytes=(size,), algorithm="tree"))[0]
    assert 0.9 * 200.0 <= ring.busbw_gb_per_s <= 200.0
    assert tree.busbw_gb_per_s > ring.busbw_gb_per_s
