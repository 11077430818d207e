"""The Topology model: validation rules, merged channels, derived views."""

from __future__ import annotations

import networkx as nx
import pytest

from scaleup.errors import TopologyFileError, UnknownCatalogEntry
from scaleup.topology import Channel, Device, Link, NodeKind, Topology, resolve_topology


def _gpus(n: int, type_name: str = "H100") -> list[Device]:
    return [Device.of(f"g{i}", type_name) for i in range(n)]


def test_device_kind_from_catalog() -> None:
    assert Device.of("s", "nvswitch3").kind is NodeKind.SWITCH
    assert Device.of("h", "host").kind is NodeKind.HOST
    assert Device.of("n", "ib-ndr").kind is NodeKind.NIC
    assert Device("g", "H100", "accelerator").kind is NodeKind.ACCELERATOR  # type: ignore[arg-type]


def test_parallel_links_merge_into_one_channel_with_summed_bandwidth() -> None:
    t = Topology("p", _gpus(2), [Link("g0", "g1", "nvlink4", 10), Link("g1", "g0", "nvlink4", 8)])
    assert len(t.channels) == 2
    forward = t.channels[t.channel_index[("g0", "g1")]]
    backward = t.channels[t.channel_index[("g1", "g0")]]
    assert forward == Channel("g0", "g1", "nvlink4", 18, 18 * 25e9, forward.latency_s)
    assert backward.bandwidth_bytes_per_s == forward.bandwidth_bytes_per_s
    assert forward.latency_s > 0


def test_bandwidth_override_per_link() -> None:
    t = Topology("p", _gpus(2), [Link("g0", "g1", "nvlink4", 2, bandwidth_gb_per_s=10.0)])
    assert t.channels[0].bandwidth_bytes_per_s == pytest.approx(20e9)


def test_rank_order_is_file_order_and_lookups() -> None:
    devices = [Device.of("sw", "nvswitch3"), Device.of("b", "H100"), Device.of("a", "H100")]
    t = Topology("o", devices, [Link("a", "sw", "nvlink4"), Link("b", "sw", "nvlink4")])
    assert [d.id for d in t.accelerators] == ["b", "a"]
    assert t.rank("a") == 1
    assert t.index("a") == 2
    assert t.device("sw").type == "nvswitch3"
    assert [d.id for d in t.switches] == ["sw"]
    assert t.hosts == ()
    assert t.nics == ()
    assert t.ranks_per_node == 2


def test_device_latency() -> None:
    t = resolve_topology("pcie-8")
    assert t.device_latency_s("g0") == 0.0
    assert t.device_latency_s("pcisw0") > 0
    assert t.device_latency_s("cpu0") > 0


def test_networkx_view_is_frozen_and_complete() -> None:
    t = resolve_topology("dgx-h100")
    g = t.to_networkx()
    assert isinstance(g, nx.DiGraph)
    assert nx.is_frozen(g)
    assert g.number_of_nodes() == len(t.devices)
    assert g.number_of_edges() == len(t.channels)
    assert g.nodes["sw0"]["kind"] == "switch"
    edge = g.edges["g0", "sw0"]
    assert edge["bandwidth_bytes_per_s"] == pytest.approx(5 * 25e9)
    assert edge["channel"] == t.channel_index[("g0", "sw0")]
    assert t.to_networkx() is g  # cached


def test_with_peer_access() -> None:
    t = resolve_topology("pcie-8")
    off = t.with_peer_access(False)
    assert not off.peer_access
    assert off.devices == t.devices
    assert off.links == t.links
    assert off != t


def test_equal_topologies_compare_and_hash_equal() -> None:
    a = Topology("p", _gpus(2), [Link("g0", "g1", "nvlink4", 18)])
    b = Topology("p", _gpus(2), [Link("g0", "g1", "nvlink4", 18)])
    assert a == b
    assert hash(a) == hash(b)


@pytest.mark.parametrize(
    ("devices", "links", "entry", "words"),
    [
        (["g0:H100", "g0:H100"], [], "g0", "duplicate device id"),
        (
            ["g0:H100", "g1:H100"],
            [("g0", "g9", "nvlink4", 1)],
            "links[0]",
            "'g9' is not a defined device",
        ),
        (
            ["g0:H100", "g1:H100"],
            [("g0", "g1", "nvlink4", 0)],
            "links[0]",
            "count must be a positive",
        ),
        (
            ["g0:H100", "g1:H100"],
            [("g0", "g1", "nvlink4", -3)],
            "links[0]",
            "count must be a positive",
        ),
        (["g0:H100", "g1:H100"], [("g0", "g0", "nvlink4", 1)], "links[0]", "two different devices"),
        (
            ["g0:H100", "g1:H100"],
            [("g0", "g1", "nvlink4", 19)],
            "g0",
            "18 links, this device uses 19",
        ),
        (["g0:H100", "g1:H100"], [("g0", "g1", "nvlink5", 1)], "g0", "no nvlink5 links"),
        (["g0:H100", "g1:H100", "g2:H100"], [("g0", "g1", "nvlink4", 1)], "g2", "not connected"),
        (["g0:nvswitch3"], [], None, "at least one accelerator"),
        (
            ["g0:H100", "g1:H100"],
            [("g0", "g1", "nvlink4", 1), ("g0", "g1", "pcie5", 1)],
            "links[1]",
            "one pair needs one technology",
        ),
    ],
)
def test_rules(
    devices: list[str], links: list[tuple[str, str, str, int]], entry: str | None, words: str
) -> None:
    devs = [Device.of(*spec.split(":")) for spec in devices]
    with pytest.raises(TopologyFileError) as info:
        Topology("bad", devs, [Link(*x) for x in links])
    assert info.value.entry == entry
    assert words in info.value.message
    assert info.value.source == "bad"


def test_switch_port_budget() -> None:
    devices = [
        *_gpus(8, "V100"),
        Device.of("sw", "nvswitch1"),
        *[Device.of(f"x{i}", "V100") for i in range(3)],
    ]
    links = [Link(d.id, "sw", "nvlink2", 2) for d in devices if d.kind is NodeKind.ACCELERATOR]
    with pytest.raises(TopologyFileError, match="18 ports, this device uses 22"):
        Topology("big", devices, links)


def test_unknown_type_and_tech_are_catalog_errors() -> None:
    with pytest.raises(UnknownCatalogEntry):
        Device.of("g0", "H1000")
    with pytest.raises(TopologyFileError, match="unknown device type 'H1000'"):
        Topology("t", [Device("g0", "H1000", NodeKind.ACCELERATOR)], [])
    with pytest.raises(UnknownCatalogEntry, match="unknown link technology 'nvlink9'") as info:
        Topology("t", _gpus(2), [Link("g0", "g1", "nvlink9")])
    assert isinstance(info.value, TopologyFileError)
    assert info.value.entry == "links[0]"


def test_kind_must_match_catalog() -> None:
    with pytest.raises(TopologyFileError, match="is of kind switch, not accelerator"):
        Topology("t", [*_gpus(1), Device("s", "nvswitch3", NodeKind.ACCELERATOR)], [])


def test_pickle_round_trip_drops_caches() -> None:
    import pickle

    t = resolve_topology("dgx-h100")
    assert t.channels
    assert t.to_networkx() is not None
    back = pickle.loads(pickle.dumps(t))
    assert back == t
    assert hash(back) == hash(t)
    assert back.channels == t.channels
    assert "_graph" not in back.__dict__
