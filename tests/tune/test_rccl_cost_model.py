"""RCCL's cost model (nccl_model with rccl_tables, rccl_inputs) and its picks on AMD nodes.

Known answers worked by hand from ROCm/rccl @0cbce2a7 src/graph/tuning.cc: baseLat (lines
57-60), tuning_model_5 (MI300X, lines 224-252), tuning_model_1 (16 MI250X GCDs, lines 104-132).
"""

from __future__ import annotations

import math

import pytest

from scaleup.errors import UsageError
from scaleup.topology import resolve_topology
from scaleup.tune import BenchRequest, TuneSession
from scaleup.tune.nccl_inputs import model_inputs
from scaleup.tune.nccl_model import Graph, ModelInputs, algo_time_us, model_entry, nccl_pick
from scaleup.tune.rccl_tables import NODE_MODELS, after_pick

GIB = 1 << 30


def _mi300x() -> ModelInputs:
    m = model_inputs(resolve_topology("mi300x-8"))
    assert m is not None
    assert m.rccl is not None
    return m


def test_mi300x_graphs_from_rome_model_79() -> None:
    m = _mi300x()
    # 7 xGMI links x 48 GB/s (GFX94X_XGMI_WIDTH) = 336 = totalBw; ringBase lists 28 rings of 8,
    # so bwIntra = bwInter = 336 / 28 = 12; comm->nChannels = 2 x 28 = 56
    assert m.graphs["ring"] == Graph(28, 12.0, 12.0)
    assert m.graphs["tree"] == m.graphs["ring"]
    assert (m.nranks, m.nnodes, m.arch, m.cpu, m.comm_channels) == (8, 1, "cdna3", "amd", 56)
    assert (m.rccl.tuning, m.gfx) == (5, "gfx942")  # type: ignore[union-attr]


def test_ring_ll_8_bytes_by_hand() -> None:
    # busBw = 28 x 12 = 336 x bwRatio Ring LL 0.08 = 26.88, x 8/14 = 15.36 GB/s;
    # latency = baseLat Ring LL 12 + 14 steps x hwLat xGMI Ring LL 0.8 = 23.2 us
    m = _mi300x()
    entry = model_entry(m, "all_reduce", "ring", "ll")
    assert entry is not None
    assert entry.bandwidth == pytest.approx(15.36)
    assert entry.latency_us == pytest.approx(23.2)
    assert algo_time_us(m, "all_reduce", "ring", "ll", 8) == pytest.approx(23.2 + 8 / 15360)


def test_ring_simple_and_tree_by_hand() -> None:
    m = _mi300x()
    # Ring Simple: 336 x 1.0 x 8/14 = 192 GB/s; 17 + 14 x 2.1 = 46.4 us
    want = 46.4 + GIB / (1000.0 * 192.0)
    assert algo_time_us(m, "all_reduce", "ring", "simple", GIB) == pytest.approx(want)
    # Tree LL: 336 x 0.06 x 0.5 = 10.08 GB/s, x treeCorrectionFactor LL [log2i(8 >> 6) = 0] 0.1;
    # latency 12 + 2 x (7 x 0.9) = 24.6 us
    assert algo_time_us(m, "all_reduce", "tree", "ll", 8) == pytest.approx(24.6 + 8 / 1008.0)
    # no Tree Simple on one gfx94 node (line 365); LL128 off (bwRatio 0, not gfx90a)
    assert model_entry(m, "all_reduce", "tree", "simple") is None
    assert model_entry(m, "all_reduce", "ring", "ll128") is None
    assert model_entry(m, "all_reduce", "tree", "ll128") is None
    # Ring LL broadcast on one gfx94 node: x1.65 (line 381); latency baseLat + one step
    bcast = model_entry(m, "broadcast", "ring", "ll")
    assert bcast is not None
    assert bcast.bandwidth == pytest.approx(336 * 0.08 * 1.65 * 8 / 8)
    assert bcast.latency_us == pytest.approx(12.8)


def test_mi300x_picks() -> None:
    m = _mi300x()
    # Ring LL until 23.2 + x / 15.36 = 46.4 + x / 192 (x ~ 387 kB), then Ring Simple
    assert nccl_pick(m, "all_reduce", 8) == ("ring", "ll")
    assert nccl_pick(m, "all_reduce", 256 << 10) == ("ring", "ll")
    assert nccl_pick(m, "all_reduce", 1 << 20) == ("ring", "simple")
    assert nccl_pick(m, "all_reduce", GIB) == ("ring", "simple")
    assert nccl_pick(m, "all_gather", 8) == ("ring", "ll")


def test_two_mi300x_nodes_latency_by_hand() -> None:
    m = model_inputs(resolve_topology("2xmi300x-8"))
    assert m is not None
    assert (m.nnodes, m.graphs["ring"].n_channels, m.comm_channels) == (2, 64, 128)
    # 2 x nNodes = 4 inter-node steps (line 354) at NET Ring LL 9.5; 26 intra-node steps at
    # max(0.8, net overhead 2 us on AMD hosts) = 2.0: 12 + 26 x 2 + 4 x 9.5 = 102 us
    entry = model_entry(m, "all_reduce", "ring", "ll")
    assert entry is not None
    assert entry.latency_us == pytest.approx(102.0)
    # across nodes the ring correction applies: Ring LL [0] = 0.1
    want = 102.0 + 8 / (1000.0 * entry.bandwidth * 0.1)
    assert algo_time_us(m, "all_reduce", "ring", "ll", 8) == pytest.approx(want)


def test_mi250x_pivot_rule() -> None:
    m = model_inputs(resolve_topology("mi250x-8"))
    assert m is not None
    assert m.rccl == NODE_MODELS["cdna2", False]
    assert (m.graphs["ring"].n_channels, m.comm_channels) == (6, 24)  # nc = 4 on gfx90a
    # pivotA2ANumBiRings=3 (rome_model_56): Tree LL on min(24, nChannels) up to 2200008 bytes
    node = NODE_MODELS["cdna2", False]
    assert after_pick(node, "all_reduce", 2200008, "ring", "simple", 24) == ("tree", "ll", 24)
    assert after_pick(node, "all_reduce", 2200009, "tree", "ll", 24) == ("ring", "simple", None)
    assert after_pick(node, "all_gather", 8, "ring", "ll", 24) == ("ring", "ll", None)


def test_two_mi250x_nodes_base_bw_by_hand() -> None:
    m = model_inputs(resolve_topology("2xmi250x-8"))
    assert m is not None
    assert m.rccl is not None
    # rome_model_59 / _65: tuning 4, baseBw 161.4 replaces nChannels x bw; ll128Enabled, but
    # LL128 also needs every GCD pair joined by xGMI (RCCL_TOPO_XGMI_ALL), which 16 GCDs are not
    assert (m.rccl.tuning, m.rccl.base_bw, m.rccl.ll128, m.comm_channels) == (4, 161.4, False, 64)
    entry = model_entry(m, "all_reduce", "ring", "simple")
    assert entry is not None
    # 161.4 x bwRatio 1.0 x 32/62; latency 17 + 58 x max(3.6, 3 x 2 us) + 4 x NET 209.2
    assert entry.bandwidth == pytest.approx(161.4 * 32 / 62)
    assert entry.latency_us == pytest.approx(17 + 58 * 6.0 + 4 * 209.2)
    assert model_entry(m, "all_reduce", "ring", "ll128") is None


def test_where_rcclS_model_does_not_apply() -> None:
    topo = resolve_topology("mi300x-8")
    assert model_inputs(topo, [0, 1, 2, 3]) is None  # a subset: no node model matches
    h100 = model_inputs(resolve_topology("dgx-h100"))
    assert h100 is not None
    assert h100.rccl is None
    with pytest.raises(UsageError):  # RCCL's constants are for AMD architectures
        ModelInputs(8, 1, "hopper", rccl=NODE_MODELS["cdna3", False])


def test_nvidia_picks_unchanged() -> None:
    m = model_inputs(resolve_topology("dgx-h100"))
    assert m is not None
    assert nccl_pick(m, "all_reduce", 8) == ("ring", "ll")
    assert nccl_pick(m, "all_reduce", GIB) == ("nvls", "simple")
    # NCCL's refinement, not RCCL's ratio: Ring LL min(llMaxBws 141, 360 x 0.5), x 8/14
    want = 15.0 + 8 / (1000 * 141.0 * 8 / 14)
    assert math.isclose(algo_time_us(m, "all_reduce", "ring", "ll", 8), want)


def test_bench_picks_on_mi300x() -> None:
    topo = resolve_topology("mi300x-8")
    sizes = (8, 1024, 128 << 20)
    small, msccl, big = TuneSession().sweep(topo, BenchRequest(sizes_bytes=sizes))
    assert (small.algorithm, small.protocol, small.channels) == ("ring", "ll", 1)
    assert small.selection == "nccl-model"
    assert (msccl.algorithm, msccl.protocol) == ("allpairs", "ll")  # MSCCL first, as RCCL
    assert (big.algorithm, big.protocol) == ("ring", "simple")
    assert big.selection == "nccl-model"
    assert "RCCL's model" in big.explain()


def test_bench_picks_on_mi250x() -> None:
    topo = resolve_topology("mi250x-8")
    small, big = TuneSession().sweep(topo, BenchRequest(sizes_bytes=(1 << 20, 4 << 20)))
    assert (small.algorithm, small.protocol) == ("tree", "ll")
    assert (big.algorithm, big.protocol) == ("ring", "simple")
