"""AWS EFA through aws-ofi-nccl: its step latency in the simulator, its reported latency in
NCCL's model (catalog ``nics.efa-100g`` / ``nics.efa-400g``)."""

from __future__ import annotations

import pytest

from scaleup import hardware
from scaleup.topology import resolve_topology
from scaleup.tune import BenchRequest, TuneSession
from scaleup.tune.nccl_inputs import model_inputs
from scaleup.tune.nccl_model import algo_time_us, model_entry


def _row(topology: str, nbytes: int) -> object:
    request = BenchRequest(sizes_bytes=(nbytes,))
    return TuneSession().sweep(resolve_topology(topology), request)[0]


def test_catalog_entries_cite_the_plugin() -> None:
    for name in ("efa-100g", "efa-400g"):
        nic = hardware.nic_spec(name)
        assert nic.reported_latency_s == pytest.approx(75e-6)
        assert nic.latency_s == pytest.approx(9.5e-6)
        assert "aws-ofi-nccl" in nic.sources["latency_s"]
        assert "aws-ofi-nccl" in nic.sources["reported_latency_s"]
    assert hardware.link_tech("efa-400g").bandwidth_gb_per_s == pytest.approx(50.0)
    # NCCL's own InfiniBand transport reports nothing (net_ib.cc: props->latency = 0)
    assert hardware.nic_spec("ib-ndr").reported_latency_s == 0.0


def test_reported_latency_reaches_only_multi_node_graphs() -> None:
    efa = model_inputs(resolve_topology("2xdgx-h100:nic=efa-400g"))
    ib = model_inputs(resolve_topology("2xdgx-h100"))
    assert efa is not None
    assert ib is not None
    assert {g.latency_inter_us for g in efa.graphs.values()} == {75.0}
    assert {g.latency_inter_us for g in ib.graphs.values()} == {0.0}
    one = model_inputs(resolve_topology("dgx-h100"))
    assert one is not None
    assert {g.latency_inter_us for g in one.graphs.values()} == {0.0}


def test_tree_latency_by_hand() -> None:
    """NCCL's tree LL latency on 2 x 8 GPUs (tuning.cc lines 384-417): base 6.8 us plus twice
    (7 intra-node NVLink steps at 0.6 us + 1 inter-node step at 5.0 us + the plugin's 75 us):
    6.8 + 2 x (4.2 + 80) = 175.2 us; 75 us more per inter-node step than on IB, and twice that
    for Simple (the flush)."""
    efa = model_inputs(resolve_topology("2xdgx-h100:nic=efa-400g"))
    ib = model_inputs(resolve_topology("2xdgx-h100"))
    assert efa is not None
    assert ib is not None
    lat = model_entry(efa, "all_reduce", "tree", "ll")
    assert lat is not None
    assert lat.latency_us == pytest.approx(175.2)
    for proto, extra in (("ll", 2 * 75.0), ("simple", 2 * 150.0)):
        d = algo_time_us(efa, "all_reduce", "tree", proto, 8) - algo_time_us(
            ib, "all_reduce", "tree", proto, 8
        )
        assert d == pytest.approx(extra)


def test_simulated_step_pays_the_adapters() -> None:
    """8 B on 2 x 8 H100, tree LL either way: the tree crosses the servers twice (up, down),
    and each crossing goes through two adapters and the scale-out switch. With EFA each adapter
    costs 9.5 us instead of InfiniBand's 1 us, and the Ethernet switch 0.6 us instead of
    InfiniBand's; nothing else differs."""
    efa, ib = _row("2xdgx-h100:nic=efa-400g", 8), _row("2xdgx-h100", 8)
    assert (efa.algorithm, efa.protocol) == (ib.algorithm, ib.protocol) == ("tree", "ll")
    nic = hardware.nic_spec("efa-400g").latency_s - hardware.nic_spec("ib-ndr").latency_s
    switch = (
        hardware.switch_chip("eth-switch").latency_s - hardware.switch_chip("ib-switch").latency_s
    )
    link = hardware.link_tech("efa-400g").latency_s - hardware.link_tech("ib-ndr").latency_s
    per_crossing = 2 * nic + switch + 2 * link
    assert efa.time_s - ib.time_s == pytest.approx(2 * per_crossing, rel=1e-6)
