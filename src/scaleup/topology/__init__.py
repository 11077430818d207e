"""Fabrics as data: devices, links and directed channels, presets, files and analysis.

>>> from scaleup.topology import resolve_topology
>>> t = resolve_topology("dgx-h100")
>>> len(t.accelerators), len(t.switches)
(8, 4)
"""

from __future__ import annotations

from scaleup.topology.faults import LinkFault, apply_faults, parse_faults
from scaleup.topology.io import dumps, load_topology, loads, save_topology
from scaleup.topology.model import Channel, Device, Link, NodeKind, Topology
from scaleup.topology.presets import PRESETS, list_presets, resolve_topology

__all__ = [
    "PRESETS",
    "Channel",
    "Device",
    "Link",
    "LinkFault",
    "NodeKind",
    "Topology",
    "apply_faults",
    "dumps",
    "list_presets",
    "load_topology",
    "loads",
    "parse_faults",
    "resolve_topology",
    "save_topology",
]
