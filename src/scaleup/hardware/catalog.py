"""Load, validate and look up the hardware catalog (``catalog.toml``, shipped as package data).

The TOML file has five tables, ``links``, ``accelerators``, ``switches``, ``hosts`` and ``nics``,
each mapping a name to an entry. Every entry carries a ``sources`` table with one string per
figure (field name -> source, or the reasoning behind a labelled estimate). The file is validated
with pydantic on load: a missing source, an unknown field, a reference to an unknown link
technology or a duplicate device name is a :class:`CatalogFileError` naming the entry.
The packaged catalog is read once (``functools.cache``).
The file's schema and the rules between entries live in :mod:`~scaleup.hardware.catalog_schema`.
"""

from __future__ import annotations

import difflib
import functools
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from types import MappingProxyType
from typing import Any, Literal

from pydantic import BaseModel

from scaleup.errors import CatalogFileError, UnknownCatalogEntry
from scaleup.files import parse_toml, read_text, validate
from scaleup.hardware.catalog_schema import (
    _AcceleratorModel,
    _CatalogModel,
    _check_references,
    _first_error,
)
from scaleup.hardware.devices import AcceleratorSpec, HostSpec, NicSpec
from scaleup.hardware.links import LinkTech
from scaleup.hardware.switches import SwitchSpec

__all__ = [
    "Catalog",
    "CatalogFileError",
    "DeviceKind",
    "accelerator",
    "catalog",
    "device_kind",
    "device_spec",
    "host_spec",
    "link_tech",
    "load_catalog",
    "max_links",
    "nic_spec",
    "parse_catalog",
    "switch_chip",
]

DeviceKind = Literal["accelerator", "switch", "host", "nic"]
DeviceSpec = AcceleratorSpec | SwitchSpec | HostSpec | NicSpec

_PACKAGED = "catalog.toml"


# --------------------------------------------------------------------------- typed catalog
@dataclass(frozen=True, slots=True)
class Catalog:
    """The whole catalog: name -> spec for each kind (read-only mappings)."""

    accelerators: Mapping[str, AcceleratorSpec]
    links: Mapping[str, LinkTech]
    switches: Mapping[str, SwitchSpec]
    hosts: Mapping[str, HostSpec]
    nics: Mapping[str, NicSpec]

    def device_names(self) -> list[str]:
        """Every name a topology device ``type`` may take."""
        return [*self.accelerators, *self.switches, *self.hosts, *self.nics]


def _freeze(d: Mapping[str, str]) -> Mapping[str, str]:
    return MappingProxyType(dict(d))


def _build(model: _CatalogModel) -> Catalog:
    def fields(item: BaseModel) -> dict[str, Any]:
        data = item.model_dump(exclude={"sources"})
        data["sources"] = _freeze(item.sources)  # type: ignore[attr-defined]
        return data

    links = {n: LinkTech(name=n, **fields(m)) for n, m in model.links.items()}

    def acc(name: str, m: _AcceleratorModel) -> AcceleratorSpec:
        per_link = None if m.link_tech is None else links[m.link_tech].bandwidth_gb_per_s
        return AcceleratorSpec(name=name, **fields(m), link_gb_per_s=per_link)

    return Catalog(
        links=MappingProxyType(links),
        accelerators=MappingProxyType({n: acc(n, m) for n, m in model.accelerators.items()}),
        switches=MappingProxyType(
            {n: SwitchSpec(name=n, **fields(m)) for n, m in model.switches.items()}
        ),
        hosts=MappingProxyType({n: HostSpec(name=n, **fields(m)) for n, m in model.hosts.items()}),
        nics=MappingProxyType({n: NicSpec(name=n, **fields(m)) for n, m in model.nics.items()}),
    )


def parse_catalog(text: str, *, source: str = "catalog.toml") -> Catalog:
    """Parse and validate catalog TOML text.

    Parameters
    ----------
    text
        The TOML document.
    source
        Name used in error messages.

    Returns
    -------
    Catalog

    Raises
    ------
    CatalogFileError
        Not TOML, or an entry breaks a rule; the message names the entry.
    """
    raw = parse_toml(text, CatalogFileError, source)
    model = validate(_CatalogModel, raw, CatalogFileError, source, locate=_first_error)
    _check_references(model, source)
    return _build(model)


def load_catalog(path: str | Path) -> Catalog:
    """Load and validate a catalog TOML file from ``path`` (the packaged one: :func:`catalog`).

    Raises
    ------
    CatalogFileError
        The file cannot be read, is not TOML, or an entry breaks a rule.
    """
    return parse_catalog(read_text(path, CatalogFileError), source=str(path))


@functools.cache
def catalog() -> Catalog:
    """The packaged hardware catalog, parsed and validated once.

    Examples
    --------
    >>> catalog().links["nvlink4"].bandwidth_gb_per_s
    25.0
    """
    text = resources.files("scaleup.hardware").joinpath(_PACKAGED).read_text(encoding="utf-8")
    return parse_catalog(text, source=f"scaleup/hardware/{_PACKAGED}")


# --------------------------------------------------------------------------- lookups
def _unknown(what: str, name: str, names: Iterable[str]) -> UnknownCatalogEntry:
    names = list(names)
    lowered = {n.lower(): n for n in names}
    close = [lowered[m] for m in difflib.get_close_matches(name.lower(), lowered, n=3, cutoff=0.5)]
    hint = f"; did you mean {', '.join(close)}?" if close else f"; known: {', '.join(names)}"
    return UnknownCatalogEntry(f"no {what} of that name in the catalog{hint}", entry=name)


def _get(table: Mapping[str, Any], what: str, name: str) -> Any:
    try:
        return table[name]
    except (KeyError, TypeError):
        raise _unknown(what, str(name), table) from None


def link_tech(name: str) -> LinkTech:
    """The link technology called ``name``.

    Examples
    --------
    >>> link_tech("nvlink5").bandwidth_gb_per_s
    50.0

    Raises
    ------
    UnknownCatalogEntry
        No link technology of that name (the message lists close matches).
    """
    return _get(catalog().links, "link technology", name)


def accelerator(name: str) -> AcceleratorSpec:
    """The accelerator called ``name``.

    Examples
    --------
    >>> accelerator("H100").scaleup_gb_per_s
    450.0
    """
    return _get(catalog().accelerators, "accelerator", name)


def switch_chip(name: str) -> SwitchSpec:
    """The switch chip called ``name``.

    Examples
    --------
    >>> switch_chip("nvswitch3").port_count
    64
    """
    return _get(catalog().switches, "switch chip", name)


def host_spec(name: str = "host") -> HostSpec:
    """The host (CPU socket / root complex) called ``name``."""
    return _get(catalog().hosts, "host", name)


def nic_spec(name: str) -> NicSpec:
    """The NIC called ``name`` (NICs are named by their link technology, e.g. ``"ib-ndr"``)."""
    return _get(catalog().nics, "NIC", name)


def device_kind(type_name: str) -> DeviceKind:
    """What kind of device a topology ``type`` names.

    Examples
    --------
    >>> device_kind("H100"), device_kind("nvswitch3"), device_kind("host"), device_kind("ib-ndr")
    ('accelerator', 'switch', 'host', 'nic')

    Raises
    ------
    UnknownCatalogEntry
        No device of that name (link technologies are not devices).
    """
    cat = catalog()
    if type_name in cat.accelerators:
        return "accelerator"
    if type_name in cat.switches:
        return "switch"
    if type_name in cat.hosts:
        return "host"
    if type_name in cat.nics:
        return "nic"
    raise _unknown("device type", str(type_name), cat.device_names())


def device_spec(type_name: str) -> DeviceSpec:
    """The spec of the device a topology ``type`` names (accelerator, switch, host or NIC)."""
    kind = device_kind(type_name)
    cat = catalog()
    tables: dict[str, Mapping[str, DeviceSpec]] = {
        "accelerator": cat.accelerators,
        "switch": cat.switches,
        "host": cat.hosts,
        "nic": cat.nics,
    }
    table = tables[kind]
    return table[type_name]


def max_links(type_name: str, tech: str | None = None) -> int | None:
    """How many links of its fabric a device may have; ``None`` where the catalog sets no bound.

    An accelerator may have ``link_count`` links of its scale-up technology, a switch chip
    ``port_count`` links of its port technology; hosts and NICs are not bounded. With ``tech``
    given: for an accelerator, a host-side link (PCIe, C2C) is not bounded (``None``) and a
    scale-up technology other than its own allows 0; for a switch, any technology of its port
    family (a PCIe 4 device on a PCIe 5 switch) shares ``port_count`` and any other allows 0.

    Examples
    --------
    >>> max_links("H100"), max_links("nvswitch3"), max_links("host")
    (18, 64, None)
    >>> max_links("H100", tech="pcie5") is None, max_links("H100", tech="nvlink5")
    (True, 0)
    """
    spec = device_spec(type_name)
    if isinstance(spec, AcceleratorSpec):
        if tech is None or tech == spec.link_tech:
            return spec.link_count
        # Another scale-up technology cannot attach; host-side links are not bounded here.
        return 0 if link_tech(tech).scope == "scale-up" else None
    if isinstance(spec, SwitchSpec):
        if tech is None or tech == spec.link_tech:
            return spec.port_count
        # A switch chip has ports of one family only (a gen5 PCIe switch takes a gen4 device).
        same = link_tech(tech).family == link_tech(spec.link_tech).family
        return spec.port_count if same else 0
    return None
