"""NCCL's own cost model (scaleup.tune.nccl_model, nccl_inputs) and the nccl-model selection."""

from __future__ import annotations

import math

import pytest

from scaleup.errors import UsageError
from scaleup.topology import resolve_topology
from scaleup.tune import BenchRequest, TuneSession
from scaleup.tune.nccl_inputs import dup_channels, model_inputs, nvls_channels, search_speed
from scaleup.tune.nccl_model import Graph, ModelInputs, algo_time_us, cost_table, nccl_pick

GIB = 1 << 30


def _h100() -> ModelInputs:
    m = model_inputs(resolve_topology("dgx-h100"))
    assert m is not None
    return m


def test_dgx_h100_graphs_as_ncclTopoCompute_finds_them() -> None:
    m = _h100()
    # 18 NVLink4 x 20.6 GB/s = 370.8: sm90 speeds 60 -> 6 channels (360), nothing better down to
    # 30; duplicated (60 >= 50) to 12 x 30; comm->nChannels = 2 x 12 = 24; NVLS: 8 heads at the
    # fastest speed under 370.8 / 8 = 46.35 (40), bwInter raised to 60 (pass 2).
    assert m.graphs["ring"] == Graph(12, 30.0, 30.0)
    assert m.graphs["tree"] == Graph(12, 30.0, 30.0)
    assert m.graphs["nvls"] == Graph(8, 40.0, 60.0)
    assert (m.nnodes, m.nranks, m.arch, m.comm_channels) == (1, 8, "hopper", 24)
    assert nvls_channels(m) == 16  # NVLS_NCHANNELS_SM90


def test_ring_simple_1gib_by_hand() -> None:
    # tuning.cc: busBw = 12 x 30 = 360 GB/s, x nRanks/nsteps = 8/14 -> 205.714 GB/s;
    # latency = baseLat 8.4 + 14 steps x hwLat NVLINK Ring Simple 3.4 = 56.0 us.
    want = 56.0 + GIB / (1000.0 * 360.0 * 8 / 14)
    assert algo_time_us(_h100(), "all_reduce", "ring", "simple", GIB) == pytest.approx(want)
    assert want == pytest.approx(5275.6, abs=0.05)


def test_other_cells_by_hand() -> None:
    m = _h100()
    # LL at 8 B: ring 6.6 + 14 x 0.6 = 15.0 us; tree 6.8 + 2 x (7 x 0.6) = 15.2 us (the busBw
    # term is 8 B / ... ~ 0); NVLS: latency = hwLat NVLS Simple 25 us alone.
    assert algo_time_us(m, "all_reduce", "ring", "ll", 0) == pytest.approx(15.0)
    assert algo_time_us(m, "all_reduce", "tree", "ll", 0) == pytest.approx(15.2)
    # NVLS 1 GiB: 40 x 0.85 x 7/8 x 2 = 59.5 per channel (< bwInter 60), x 8 x 8/14 = 272 GB/s
    nvls = 25.0 + GIB / (1000.0 * 59.5 * 8 * 8 / 14)
    assert algo_time_us(m, "all_reduce", "nvls", "simple", GIB) == pytest.approx(nvls)
    # two nodes of 8: tree LL latency 6.8 + 2 x (7 x 0.6 + log2(2) x NET Tree LL 5.0) = 25.2
    two = ModelInputs(16, 2, "ampere", {"tree": Graph(4, 24.0, 24.0)}, comm_channels=8)
    assert algo_time_us(two, "all_reduce", "tree", "ll", 0) == pytest.approx(25.2)


def test_picks_match_nccls_documented_behaviour() -> None:
    m = _h100()
    assert nccl_pick(m, "all_reduce", 8) == ("ring", "ll")  # LL for tiny messages
    assert nccl_pick(m, "all_reduce", GIB) == ("nvls", "simple")  # NVLS at 1 GiB on H100
    # all_gather: NVLS's busBw is not converted (tuning.cc lines 376-382): 40 x 0.85 x 7/8 x
    # 7/8 x 8 = 208 GB/s against the ring's 360 x 8/7; NCCL takes NVLS there only with
    # registered buffers (enqueue.cc, NCCL_CTA_POLICY_EFFICIENCY), not modelled
    assert nccl_pick(m, "all_gather", GIB) == ("ring", "simple")
    assert nccl_pick(m, "broadcast", GIB) == ("ring", "simple")  # ring-only collective
    a100 = model_inputs(resolve_topology("dgx-a100"))
    assert a100 is not None
    assert "nvls" not in a100.graphs  # no NVLS before Hopper
    assert nccl_pick(a100, "all_reduce", GIB) == ("ring", "simple")
    # three or more nodes: trees get bwInter, rings win at large sizes
    p4dn3 = model_inputs(resolve_topology("3xdgx-a100:nic=eth-100g,nics=4"))
    assert p4dn3 is not None
    assert p4dn3.graphs["ring"] == Graph(4, 12.0, 12.0)
    assert nccl_pick(p4dn3, "all_reduce", GIB) == ("ring", "simple")
    # a tie goes to the first in NCCL's order (tree before ring)
    tied = ModelInputs(8, 1, "hopper", {"ring": Graph(1, 10.0, 10.0)})
    table = cost_table(tied, "all_reduce", 8)
    assert set(table) == {("ring", "ll"), ("ring", "ll128"), ("ring", "simple")}


def test_search_helpers() -> None:
    assert search_speed([370.8], (60.0, 50.0, 40.0, 30.0, 24.0)) == (6, 60.0)
    assert search_speed([1.0], (60.0, 50.0)) == (0, 0.0)
    assert dup_channels(6, 60.0, 90) == Graph(12, 30.0, 30.0)
    assert dup_channels(8, 48.0, 90) == Graph(8, 48.0, 48.0)  # ccMin > 80, < 50, > 4 channels
    assert dup_channels(4, 24.0, 80) == Graph(4, 24.0, 24.0)  # under 25 GB/s


def test_selection_times_ncclS_pick() -> None:
    topo = resolve_topology("dgx-h100")
    request = BenchRequest(sizes_bytes=(8, GIB), selection="nccl-model")
    small, big = TuneSession().sweep(topo, request)
    assert (small.algorithm, small.protocol, small.selection) == ("ring", "ll", "nccl-model")
    assert small.channels == 1  # 24 channels trimmed to 1 at 8 B (enqueue.cc)
    assert (big.algorithm, big.protocol, big.channels) == ("nvls", "simple", 16)
    assert dict(((a, p), t) for a, p, t in big.predicted)[("nvls", "simple")] == pytest.approx(
        algo_time_us(_h100(), "all_reduce", "nvls", "simple", GIB) * 1e-6
    )
    assert "NCCL's model" in big.explain()
    # NCCL_ALGO / NCCL_PROTO pins narrow what the model picks from
    pinned = BenchRequest(
        sizes_bytes=(GIB,), selection="nccl-model", algorithms=frozenset({"ring"})
    )
    assert TuneSession().sweep(topo, pinned)[0].candidate.algorithm == "ring"
    proto = BenchRequest(sizes_bytes=(GIB,), selection="nccl-model", protocol="ll128")
    assert TuneSession().sweep(topo, proto)[0].protocol == "ll128"


def test_selection_falls_back_where_ncclS_model_does_not_apply() -> None:
    # RCCL groups no node model matches (half an MI300X node), and algorithms NCCL does not
    # model: the fastest simulated, as before (whole AMD nodes: test_rccl_cost_model.py)
    topo = resolve_topology("mi300x-8")
    assert model_inputs(topo, [0, 1, 2, 3]) is None
    for sel in ("fastest", "nccl-model"):
        req = BenchRequest(sizes_bytes=(GIB,), selection=sel, ranks=4)
        assert TuneSession().sweep(topo, req)[0].selection == "fastest"
    hier = BenchRequest(sizes_bytes=(GIB,), selection="nccl-model", algorithm="direct")
    assert TuneSession().sweep(resolve_topology("dgx-h100"), hier)[0].algorithm == "direct"


def test_one_rank_tunes_nothing() -> None:
    # NCCL's cost table for one rank is Ring Simple at 0 and the launch a local copy
    # (enqueue.cc 1993-1996, 3039-3040); the fuzz campaign found `--ranks 1` overflowing here
    for name in ("dgx-h100", "mi300x-8"):
        topo = resolve_topology(name)
        assert model_inputs(topo, [0]) is None
        req = BenchRequest(sizes_bytes=(8, GIB), selection="nccl-model", ranks=1)
        assert [c.selection for c in TuneSession().sweep(topo, req)] == ["fastest"] * 2


def test_bad_input() -> None:
    with pytest.raises(UsageError) as err:
        BenchRequest(selection="slowest")
    assert err.value.source == "selection"
    with pytest.raises(UsageError):
        ModelInputs(nranks=4, nnodes=8, arch="hopper")
    with pytest.raises(UsageError):
        ModelInputs(nranks=8, nnodes=1, arch="cdna3")
    with pytest.raises(UsageError):
        ModelInputs(nranks=8, nnodes=1, arch="hopper", cpu="sparc")
    with pytest.raises(UsageError):
        algo_time_us(_h100(), "all_reduce", "ring", "ll", -1)
    m = _h100()
    assert algo_time_us(m, "all_reduce", "nvls", "ll", GIB) == math.inf  # NVLS is Simple-only
    assert algo_time_us(m, "all_to_all", "ring", "simple", GIB) == math.inf  # not modelled
    assert algo_time_us(m, "all_reduce", "nvls_tree", "simple", GIB) == math.inf  # no graph
    assert nccl_pick(m, "all_reduce", GIB, pairs=[]) is None


def test_explain_shows_the_models_times() -> None:
    from scaleup.tune.explain import explain_sweep

    _, (e,) = explain_sweep(resolve_topology("dgx-h100"), BenchRequest(sizes_bytes=(GIB,)))
    picked = (e.selection, e.algorithm, e.protocol, e.channels)
    assert picked == ("nccl-model", "nvls", "simple", 16)
    assert {(a, p) for a, p, _ in e.predicted} >= {("ring", "simple"), ("nvls", "simple")}
    assert len(e.candidates) > 1  # the others are still simulated (or pruned), for the table
    assert [c.chosen for c in e.candidates].count(True) == 1


def test_cli_select_flag() -> None:
    from typer.testing import CliRunner

    from scaleup.cli import app

    runner = CliRunner()
    args = ["bench", "-b", "64K", "-e", "64K", "--csv"]
    model = runner.invoke(app, args)
    fastest = runner.invoke(app, [*args, "--select", "fastest"])
    assert model.exit_code == 0, model.output
    assert fastest.exit_code == 0, fastest.output
    assert ",ring,ll,2" in model.output.replace(" ", "")  # NCCL's model: ring LL, trimmed to 2
    assert ",tree,ll,16" in fastest.output.replace(" ", "")  # the least simulated: chained tree
    bad = runner.invoke(app, [*args, "--select", "slowest"])
    assert bad.exit_code == 2
    assert "--select" in bad.output
    runtime_args = ["bench", "--runtime", "threads", "-g", "2", "--select", "fastest"]
    runtime = runner.invoke(app, runtime_args)
    assert runtime.exit_code == 2
    assert "--select" in runtime.output
