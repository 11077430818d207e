"""The hardware catalog: link technologies, accelerators, switch chips, hosts and NICs.

Every figure is read from ``catalog.toml`` (package data) and carries its source in the spec's
``sources`` mapping. Bandwidths are GB/s = 1e9 bytes/s, ONE link, PER DIRECTION.

>>> from scaleup.hardware import accelerator, link_tech
>>> accelerator("H100").scaleup_gb_per_s, link_tech("nvlink4").bandwidth_gb_per_s
(450.0, 25.0)
"""

from __future__ import annotations

from scaleup.hardware.catalog import (
    Catalog,
    CatalogFileError,
    DeviceKind,
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
from scaleup.hardware.devices import AcceleratorSpec, HostSpec, NicSpec
from scaleup.hardware.links import LinkFamily, LinkScope, LinkTech
from scaleup.hardware.switches import SwitchSpec

__all__ = [
    "AcceleratorSpec",
    "Catalog",
    "CatalogFileError",
    "DeviceKind",
    "HostSpec",
    "LinkFamily",
    "LinkScope",
    "LinkTech",
    "NicSpec",
    "SwitchSpec",
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
