"""Tests of the hardware catalog: names, known figures, sources, lookups and validation."""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path

import pytest

from scaleup.errors import InputError, UnknownCatalogEntry
from scaleup.hardware import (
    AcceleratorSpec,
    CatalogFileError,
    HostSpec,
    LinkTech,
    NicSpec,
    SwitchSpec,
    accelerator,
    catalog,
    device_kind,
    device_spec,
    host_spec,
    link_tech,
    load_catalog,
    max_links,
    nic_spec,
    parse_catalog,
    switch_chip,
)

GIB = 2**30

LINKS = [
    *(f"nvlink{i}" for i in range(1, 6)),
    *(f"pcie{i}" for i in range(3, 7)),
    "xgmi-mi250x",
    "xgmi-mi300x",
    "xgmi-mi355x",
    "ualink1",
    "ib-hdr",
    "ib-ndr",
    "ib-xdr",
    "eth-100g",
    "eth-400g",
    "eth-800g",
    "upi",
    "c2c",
]
ACCELERATORS = [
    "P100", "V100", "A100", "H100", "H200", "H800", "B200", "GB200",
    "MI250X", "MI300X", "MI325X", "MI355X", "H100-PCIe", "RTX4090",
]  # fmt: skip
SWITCHES = [
    "nvswitch1", "nvswitch2", "nvswitch3", "nvswitch4",
    "pcie-switch", "ualink-switch", "ib-switch", "eth-switch",
]  # fmt: skip
NICS = ["ib-hdr", "ib-ndr", "ib-xdr", "eth-100g", "eth-400g", "eth-800g"]

#: Fields of each spec type that are figures and so must carry a source.
FIGURES = {
    LinkTech: ("bandwidth_gb_per_s", "latency_s"),
    AcceleratorSpec: ("hbm_bytes", "hbm_gb_per_s", "link_count", "peak_bf16_tflops"),
    SwitchSpec: ("port_count", "latency_s"),
    HostSpec: ("memory_gb_per_s", "latency_s"),
    NicSpec: ("latency_s",),
}


def all_specs() -> list[object]:
    cat = catalog()
    return [
        *cat.links.values(),
        *cat.accelerators.values(),
        *cat.switches.values(),
        *cat.hosts.values(),
        *cat.nics.values(),
    ]


# ----------------------------------------------------------------------------------- names
def test_every_contract_name_is_present() -> None:
    cat = catalog()
    assert set(LINKS) <= set(cat.links)
    assert set(ACCELERATORS) <= set(cat.accelerators)
    assert set(SWITCHES) <= set(cat.switches)
    assert set(NICS) <= set(cat.nics)
    assert "host" in cat.hosts


@pytest.mark.parametrize("spec", all_specs(), ids=lambda s: s.name)  # type: ignore[attr-defined]
def test_every_figure_has_a_source(spec: object) -> None:
    sources = spec.sources  # type: ignore[attr-defined]
    for field in FIGURES[type(spec)]:
        assert sources.get(field, "").strip(), f"no source for {field}"
    if isinstance(spec, LinkTech) and spec.encoding_efficiency != 1.0:
        assert sources.get("encoding_efficiency")
    if isinstance(spec, SwitchSpec) and spec.in_switch_reduction:
        assert sources.get("in_switch_reduction")
    for text in sources.values():
        assert "PENDING" not in text


@pytest.mark.parametrize("spec", all_specs(), ids=lambda s: s.name)  # type: ignore[attr-defined]
def test_specs_are_frozen_and_hashable(spec: object) -> None:
    field = dataclasses.fields(spec)[0].name  # type: ignore[arg-type]
    with pytest.raises(dataclasses.FrozenInstanceError):
        setattr(spec, field, "x")
    hash(spec)
    with pytest.raises(TypeError):
        spec.sources["x"] = "y"  # type: ignore[attr-defined, index]


# ----------------------------------------------------------------------------------- figures
@pytest.mark.parametrize(
    ("name", "gb_per_s"),
    [
        ("nvlink1", 20.0),
        ("nvlink2", 25.0),
        ("nvlink3", 25.0),
        ("nvlink4", 25.0),
        ("nvlink5", 50.0),
        ("xgmi-mi300x", 64.0),
        ("ualink1", 100.0),
        ("ib-ndr", 50.0),
        ("eth-800g", 100.0),
    ],
)
def test_link_bandwidth_per_direction(name: str, gb_per_s: float) -> None:
    lt = link_tech(name)
    assert lt.bandwidth_gb_per_s == gb_per_s
    assert lt.bandwidth_bytes_per_s == gb_per_s * 1e9


def test_pcie_x16_rates() -> None:
    assert link_tech("pcie5").bandwidth_gb_per_s == 64.0
    assert link_tech("pcie5").effective_gb_per_s == pytest.approx(63.0, abs=0.05)
    assert link_tech("pcie4").bandwidth_gb_per_s == 32.0
    assert link_tech("pcie6").effective_gb_per_s == pytest.approx(121.0, abs=0.5)
    rates = [link_tech(f"pcie{i}").bandwidth_gb_per_s for i in range(3, 7)]
    assert rates == sorted(rates)
    assert all(b == 2 * a for a, b in zip(rates, rates[1:], strict=False))


@pytest.mark.parametrize(
    ("name", "links", "per_dir_gb_per_s"),
    [
        ("P100", 4, 80.0),
        ("V100", 6, 150.0),
        ("A100", 12, 300.0),
        ("H100", 18, 450.0),
        ("H200", 18, 450.0),
        ("H800", 8, 200.0),
        ("H20", 18, 450.0),
        ("B200", 18, 900.0),
        ("GB200", 18, 900.0),
        ("MI300X", 7, 448.0),
        ("RTX4090", 0, 0.0),
    ],
)
def test_scaleup_bandwidth(name: str, links: int, per_dir_gb_per_s: float) -> None:
    acc = accelerator(name)
    assert acc.link_count == links
    assert acc.scaleup_gb_per_s == pytest.approx(per_dir_gb_per_s)
    assert acc.scaleup_bytes_per_s == pytest.approx(per_dir_gb_per_s * 1e9)


def test_known_memory_figures() -> None:
    h200 = accelerator("H200")
    assert h200.hbm_bytes == 141_000_000_000
    assert h200.hbm_gb_per_s == 4800.0
    mi300x = accelerator("MI300X")
    assert mi300x.hbm_bytes == 192 * GIB  # ROCm states GiB
    assert mi300x.hbm_gb_per_s == 5300.0
    assert accelerator("H100").hbm_bytes == 80_000_000_000
    assert accelerator("H100").hbm_bytes_per_s == 3.35e12


def test_mi250x_is_one_gcd() -> None:
    gcd = accelerator("MI250X")
    assert gcd.hbm_bytes == 64 * GIB
    assert gcd.hbm_gb_per_s == pytest.approx(1638.4)
    assert "GCD" in gcd.sources["hbm_bytes"]


def test_dense_bf16() -> None:
    assert accelerator("H100").peak_bf16_tflops == pytest.approx(989.4)
    assert accelerator("A100").peak_bf16_flops == pytest.approx(312e12)
    assert "FP16" in accelerator("V100").sources["peak_bf16_tflops"]


def test_accelerator_links_resolve() -> None:
    assert accelerator("H100").link == link_tech("nvlink4")
    assert accelerator("RTX4090").link is None
    assert accelerator("RTX4090").link_tech is None
    assert accelerator("GB200").host_link == link_tech("c2c")
    assert accelerator("H100-PCIe").host_link_tech == "pcie5"


def test_switch_chips() -> None:
    assert switch_chip("nvswitch3").port_count == 64
    assert switch_chip("nvswitch3").in_switch_reduction
    assert switch_chip("nvswitch4").port_count == 72
    assert switch_chip("nvswitch4").in_switch_reduction
    assert not switch_chip("nvswitch2").in_switch_reduction
    assert switch_chip("nvswitch1").port_count == 18
    assert switch_chip("ualink-switch").latency_s <= 250e-9
    assert switch_chip("pcie-switch").port_bandwidth_bytes_per_s == 64e9
    for sw in catalog().switches.values():
        assert sw.reduction_bytes_per_s is None or sw.in_switch_reduction


def test_hosts_and_nics() -> None:
    host = host_spec()
    assert host is host_spec("host")
    assert host.memory_gb_per_s == pytest.approx(307.2)
    assert host.socket_link_tech == "upi"
    assert host.memory_bytes_per_s == pytest.approx(307.2e9)
    for name in NICS:
        nic = nic_spec(name)
        assert nic.link_tech == name
        assert nic.bandwidth_bytes_per_s == link_tech(name).bandwidth_bytes_per_s


def test_every_latency_is_plausible() -> None:
    for spec in all_specs():
        lat = getattr(spec, "latency_s", None)
        if lat is not None:
            assert 1e-9 <= lat <= 1e-5, spec


# ----------------------------------------------------------------------------------- lookups
@pytest.mark.parametrize(
    ("name", "kind"),
    [("H100", "accelerator"), ("nvswitch3", "switch"), ("host", "host"), ("ib-ndr", "nic")],
)
def test_device_kind(name: str, kind: str) -> None:
    assert device_kind(name) == kind
    spec = device_spec(name)
    assert spec.name == name


def test_every_device_name_has_one_kind() -> None:
    names = catalog().device_names()
    assert len(names) == len(set(names))
    for name in names:
        device_kind(name)


@pytest.mark.parametrize(
    ("lookup", "bad", "close"),
    [
        (accelerator, "h100", "H100"),
        (link_tech, "nvlink9", "nvlink5"),
        (switch_chip, "nvswich3", "nvswitch3"),
        (host_spec, "hots", "host"),
        (nic_spec, "ib-ndx", "ib-ndr"),
        (device_kind, "H1000", "H100"),
        (device_spec, "nvlink4", "nvswitch4"),
    ],
)
def test_unknown_names_raise_with_close_matches(lookup: object, bad: str, close: str) -> None:
    with pytest.raises(UnknownCatalogEntry) as info:
        lookup(bad)  # type: ignore[operator]
    msg = str(info.value)
    assert bad in msg
    assert close in msg
    assert "\n" not in msg
    assert info.value.entry == bad
    assert isinstance(info.value, InputError)


def test_unknown_name_without_close_match_lists_known() -> None:
    with pytest.raises(UnknownCatalogEntry, match="known: "):
        link_tech("zzzzzzzzzz")


def test_max_links() -> None:
    assert max_links("H100") == 18
    assert max_links("H800") == 8
    assert max_links("MI300X") == 7
    assert max_links("RTX4090") == 0
    assert max_links("nvswitch3") == 64
    assert max_links("pcie-switch") == 9
    assert max_links("host") is None
    assert max_links("ib-ndr") is None
    assert max_links("H100", tech="nvlink4") == 18
    assert max_links("H100", tech="pcie5") is None
    assert max_links("H100", tech="nvlink5") == 0
    assert max_links("pcie-switch", tech="pcie4") == 9
    assert max_links("nvswitch3", tech="pcie5") == 0
    with pytest.raises(UnknownCatalogEntry):
        max_links("nope")


def test_catalog_is_cached() -> None:
    assert catalog() is catalog()


# ----------------------------------------------------------------------------------- validation
GOOD = """
[links.l1]
family = "nvlink"
scope = "scale-up"
bandwidth_gb_per_s = 25.0
latency_s = 1e-7
[links.l1.sources]
bandwidth_gb_per_s = "a"
latency_s = "b"

[accelerators.A]
vendor = "x"
arch = "y"
hbm_bytes = 1000
hbm_gb_per_s = 1.0
link_tech = "l1"
link_count = 2
host_link_tech = "l1"
peak_bf16_tflops = 1.0
[accelerators.A.sources]
hbm_bytes = "s"
hbm_gb_per_s = "s"
link_count = "s"
peak_bf16_tflops = "s"

[switches]
[hosts]
[nics]
"""

DUPLICATE_NIC = """[nics.A]
link_tech = "l1"
host_link_tech = "l1"
latency_s = 1e-6
[nics.A.sources]
latency_s = "s"
"""


def test_parse_minimal_catalog() -> None:
    cat = parse_catalog(GOOD)
    assert cat.accelerators["A"].scaleup_gb_per_s == 50.0  # resolved against its own links


@pytest.mark.parametrize(
    ("broken", "entry", "words"),
    [
        (GOOD.replace('latency_s = "b"\n', ""), "links.l1", "no source for latency_s"),
        (GOOD.replace('vendor = "x"', 'vendor = "x"\ncolour = "red"'), "accelerators.A", "colour"),
        (GOOD.replace('link_tech = "l1"', 'link_tech = "l9"'), "accelerators.A", "'l9'"),
        (GOOD.replace("hbm_gb_per_s = 1.0", "hbm_gb_per_s = -1.0"), "accelerators.A", "greater"),
        (GOOD.replace("link_count = 2", "link_count = 0"), "accelerators.A", "link_count"),
        (GOOD.replace("[nics]", DUPLICATE_NIC), "nics.A", "also used"),
        (GOOD.replace("[links.l1]\n", "[links.l1\n"), None, "not valid TOML"),
    ],
)
def test_broken_catalog_names_the_entry(broken: str, entry: str | None, words: str) -> None:
    with pytest.raises(CatalogFileError) as info:
        parse_catalog(broken, source="bad.toml")
    err = info.value
    assert err.source == "bad.toml"
    assert err.entry == entry
    assert words in str(err)
    assert "\n" not in err.one_line()


def test_load_catalog_file(tmp_path: Path) -> None:
    path = tmp_path / "cat.toml"
    path.write_text(GOOD, encoding="utf-8")
    assert "A" in load_catalog(path).accelerators
    with pytest.raises(CatalogFileError, match="cannot read"):
        load_catalog(tmp_path / "missing.toml")


def test_units_are_consistent() -> None:
    for lt in catalog().links.values():
        assert math.isclose(lt.bandwidth_bytes_per_s, lt.bandwidth_gb_per_s * 1e9)
        assert 0 < lt.encoding_efficiency <= 1
