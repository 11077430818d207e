"""The elements a Topology is made of: device kinds, devices, links and directed channels.

Split from :mod:`scaleup.topology.model` (which re-exports these names and stays their public
home) so that the validation in :mod:`scaleup.topology.validate` can use them without importing
the Topology class itself. Also here: the catalog look-ups both need (lazy, so this module
imports before the catalog is complete) and :func:`bulk`, used while building many elements.
"""

from __future__ import annotations

import contextlib
import difflib
import enum
import gc
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from scaleup import hardware
from scaleup.errors import UnknownCatalogEntry, UnknownTopologyEntry

__all__ = ["Channel", "Device", "Link", "NodeKind", "bulk"]


@contextlib.contextmanager
def bulk() -> Iterator[None]:
    """Pause CPython's cyclic garbage collector while many acyclic objects are made.

    Building a 16,384-GPU fabric makes ~600,000 devices, links and channels, none of which can
    form a reference cycle; each allocation burst still triggers full collections that walk every
    live object, which doubled the build time (1.8 s -> 0.9 s without them). The collector is
    turned back on when the block ends, if it was on before.
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


class NodeKind(enum.StrEnum):
    """What a device is; values as ``scaleup.hardware.device_kind`` returns them."""

    ACCELERATOR = "accelerator"
    SWITCH = "switch"
    HOST = "host"
    NIC = "nic"

    def __str__(self) -> str:
        return self.value


@dataclass(frozen=True)
class Device:
    """One node of the fabric: an accelerator, a switch chip, a host (CPU/root complex) or a NIC.

    ``node`` is the server index in a multi-node topology (0 in a single machine).
    """

    id: str
    type: str
    kind: NodeKind
    node: int = 0

    def __post_init__(self) -> None:
        if not isinstance(self.kind, NodeKind):
            object.__setattr__(self, "kind", NodeKind(self.kind))

    @classmethod
    def of(cls, id: str, type: str, node: int = 0) -> Device:  # noqa: A002 - field name
        """A device whose kind is looked up in the catalog (what files and builders use)."""
        return cls(id, type, _kind_of(type, id), node)


@dataclass(frozen=True)
class Link:
    """``count`` parallel physical links of technology ``tech`` between devices ``a`` and ``b``.

    ``bandwidth_gb_per_s`` optionally overrides the catalog's per-link, per-direction bandwidth
    (GB/s as written in the file, kept as written so files round-trip exactly).
    """

    a: str
    b: str
    tech: str
    count: int = 1
    bandwidth_gb_per_s: float | None = None


@dataclass(frozen=True)
class Channel:
    """One direction of the merged links between two devices."""

    src: str
    dst: str
    tech: str
    count: int
    bandwidth_bytes_per_s: float
    latency_s: float


# -- catalog access (lazy, so this module imports before the catalog is complete) -----------
def _known(names: Iterable[str], name: str) -> str:
    close = difflib.get_close_matches(name, list(names), n=3)
    return f" (did you mean {', '.join(close)}?)" if close else ""


def _kind_of(type_name: str, entry: str, source: str | None = None) -> NodeKind:
    try:
        return NodeKind(hardware.device_kind(type_name))
    except UnknownCatalogEntry as error:
        raise UnknownTopologyEntry(
            f"unknown device type {type_name!r}: {error.message}", source=source, entry=entry
        ) from None


def _tech(name: str) -> Any:
    return hardware.link_tech(name)
