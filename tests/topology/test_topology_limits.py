"""Topology sizes: generators and presets refuse shapes past scaleup.limits before building them,
files and the model refuse link counts, bandwidths and node indices past them, and odd names
are one-line errors."""

from __future__ import annotations

import pytest

from scaleup import limits
from scaleup.errors import LimitError, TopologyFileError, UnknownPreset, UsageError
from scaleup.topology import Device, Link, Topology, generators, loads, resolve_topology
from scaleup.topology.generators import full_mesh, multi_node, switched


@pytest.fixture
def tiny_limits(monkeypatch: pytest.MonkeyPatch) -> None:
    """Limits small enough that refusing (not building) is what a test sees."""
    monkeypatch.setattr(limits, "MAX_LINKS", 10)
    monkeypatch.setattr(limits, "MAX_DEVICES", 12)


@pytest.mark.usefixtures("tiny_limits")
def test_generators_refuse_shapes_past_the_limits_before_building() -> None:
    with pytest.raises(LimitError, match="15 links is more than the limit of 10") as info:
        full_mesh(6, "MI300X")
    assert info.value.source == "n"
    with pytest.raises(LimitError, match="MAX_LINKS") as info:
        switched(4, "H100", "nvswitch3", planes=3)
    assert info.value.source == "planes"
    with pytest.raises(LimitError, match="MAX_DEVICES"):
        multi_node(full_mesh(2, "MI300X"), 4)


def test_zero_planes_is_a_usage_error_naming_the_parameter() -> None:
    with pytest.raises(UsageError) as info:
        resolve_topology("ualink-pod:planes=0")
    assert (info.value.source, info.value.entry) == ("ualink-pod", "planes")


def test_an_nx_prefix_past_max_ranks_is_refused_before_the_servers_are_built(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    resolve_topology("dgx-h100")  # the base preset, cached before devices are forbidden

    def no_device(*args: object, **kwargs: object) -> None:
        raise AssertionError("a device was built")

    monkeypatch.setattr(generators, "Device", no_device)
    with pytest.raises(LimitError, match="16392 accelerators is more than the limit") as info:
        resolve_topology("2049xdgx-h100")
    assert (info.value.source, info.value.entry) == ("2049xdgx-h100", "n")


@pytest.mark.parametrize(
    "spec", ["x" * 300, "x" * (limits.MAX_SPEC_CHARS + 1), "a\x00b", "99999xdgx-h100"]
)
def test_odd_and_huge_specs_are_one_line_errors(spec: str) -> None:
    with pytest.raises((LimitError, UnknownPreset)) as info:
        resolve_topology(spec)
    assert len(info.value.one_line()) < 200


def _pair(**link: object) -> Topology:
    devices = [Device.of("g0", "H100"), Device.of("g1", "H100", **link.pop("node", {}))]
    return Topology("pair", devices, [Link("g0", "g1", "nvlink4", **link)])


@pytest.mark.parametrize(
    ("link", "constant"),
    [
        ({"count": limits.MAX_LINK_COUNT + 1}, "MAX_LINK_COUNT"),
        ({"count": 10**400}, "MAX_LINK_COUNT"),
        ({"bandwidth_gb_per_s": 1e300}, "MAX_LINK_GB_PER_S"),
        ({"node": {"node": 10**30}}, "MAX_DEVICES"),
    ],
)
def test_the_model_refuses_link_counts_bandwidths_and_nodes_past_the_limits(
    link: dict, constant: str
) -> None:
    with pytest.raises(LimitError, match=constant) as info:
        _pair(**link)
    assert info.value.source == "pair"


def test_a_file_with_a_huge_bandwidth_names_the_link() -> None:
    text = (
        'name = "t"\n[[devices]]\nid = "g0"\ntype = "H100"\n[[devices]]\nid = "g1"\ntype = "H100"\n'
        '[[links]]\na = "g0"\nb = "g1"\ntech = "nvlink4"\nbandwidth_gb_per_s = 1e300\n'
    )
    with pytest.raises(LimitError) as info:
        loads(text, source="f.toml")
    assert (info.value.source, info.value.entry) == ("f.toml", "links[0]")


def test_an_integer_too_large_for_a_float_names_its_entry() -> None:
    """TOML integers have any length; pydantic's finiteness check raised OverflowError on one
    past a double's range (found by tests/fuzz/test_fuzz_topology_toml.py)."""
    text = (
        'name = "t"\n[[devices]]\nid = "g0"\ntype = "H100"\n[[devices]]\nid = "g1"\ntype = "H100"\n'
        '[[links]]\na = "g0"\nb = "g1"\ntech = "nvlink4"\nbandwidth_gb_per_s = 1' + "0" * 400 + "\n"
    )
    with pytest.raises(TopologyFileError, match="too large") as info:
        loads(text, source="f.toml")
    assert (info.value.source, info.value.entry) == ("f.toml", "links[0].bandwidth_gb_per_s")


@pytest.mark.parametrize(
    "text",
    [
        'name = "' + "x" * 300 + '"\n[[devices]]\nid = "g0"\ntype = "H100"\n',
        "name = " + "[" * 5000 + "]" * 5000 + "\n",
    ],
)
def test_long_names_and_deep_nesting_in_files_are_one_line_errors(text: str) -> None:
    with pytest.raises(TopologyFileError) as info:
        loads(text, source="f.toml")
    assert info.value.source == "f.toml"
