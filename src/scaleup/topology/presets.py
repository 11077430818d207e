"""Named machines, wired as shipped: a registry ``name -> (builder, one-line description)``.

Every builder returns the same :class:`~scaleup.topology.model.Topology` a file would. Presets
model the accelerator fabric (GPUs and the switch chips between them); hosts appear only where
peer traffic crosses them (``pcie-8``, ``h100-nvl-pair``, ``gb200-nvl72:hosts=true``).
Ids: accelerators ``g{rank}``, NVSwitch / UALink switches ``sw{i}``, PCIe switches ``pcisw{i}``,
CPU sockets ``cpu{i}``. ``Nx<preset>`` (see :func:`resolve_topology`) prefixes ids per server
with ``n{i}.``.
The builders themselves live in :mod:`~scaleup.topology.machines`; this module holds the
registry and turns what a user typed into a topology.
"""

from __future__ import annotations

import difflib
import functools
import inspect
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from scaleup import limits
from scaleup.errors import ScaleupError, UnknownPreset, UsageError
from scaleup.topology.generators import multi_node
from scaleup.topology.machines import (
    dgx1_p100,
    dgx1_v100,
    dgx2,
    dgx_a100,
    dgx_h100,
    dgx_h200,
    gb200_nvl72,
    h100_nvl_pair,
    hgx_b200,
    mi250x_8,
    mi300x_8,
    pcie_8,
    ualink_pod,
)
from scaleup.topology.machines_next import (
    gaudi3_8,
    gb300_nvl72,
    helios_72,
    hgx_b300,
    mi355x_8,
    vr_nvl72,
)
from scaleup.topology.machines_torus import tpu7x, tpu_v5p, trn2_16, trn2_ultraserver
from scaleup.topology.model import Topology

__all__ = ["PRESETS", "Preset", "build_preset", "list_presets", "parse_params", "resolve_topology"]


@dataclass(frozen=True)
class Preset:
    """A registry entry: the builder (keyword parameters only) and one line saying what it is."""

    builder: Callable[..., Topology]
    description: str


PRESETS: dict[str, Preset] = {
    "pcie-8": Preset(
        pcie_8, "8 PCIe accelerators under 4 PCIe switches and 2 CPU sockets, no peer links"
    ),
    "dgx1-p100": Preset(dgx1_p100, "DGX-1 P100: hybrid cube-mesh, NVLink1"),
    "dgx1-v100": Preset(dgx1_v100, "DGX-1 V100: hybrid cube-mesh, NVLink2, some pairs doubled"),
    "dgx2": Preset(dgx2, "DGX-2: 16 V100, 12 NVSwitch gen1 on two baseboards"),
    "dgx-a100": Preset(dgx_a100, "DGX A100: 8 A100, 6 NVSwitch gen2"),
    "dgx-h100": Preset(dgx_h100, "DGX H100: 8 H100, 4 NVSwitch gen3, 450 GB/s per GPU"),
    "dgx-h200": Preset(dgx_h200, "DGX H200: 8 H200, 4 NVSwitch gen3"),
    "hgx-b200": Preset(hgx_b200, "HGX B200: 8 B200, 2 NVLink5 switch chips, 900 GB/s per GPU"),
    "gb200-nvl72": Preset(gb200_nvl72, "GB200 NVL72: 72 GPUs, 18 NVLink5 switch chips"),
    "hgx-b300": Preset(hgx_b300, "HGX B300: 8 B300, 2 NVLink5 switch chips, 900 GB/s per GPU"),
    "gb300-nvl72": Preset(gb300_nvl72, "GB300 NVL72: 72 GPUs, 18 NVLink5 switch chips"),
    "vr-nvl72": Preset(
        vr_nvl72, "Vera Rubin NVL72: 72 Rubin, 36 NVLink 6 switch chips, 1.8 TB/s per GPU"
    ),
    "mi300x-8": Preset(mi300x_8, "8 MI300X: full Infinity Fabric mesh, no switch"),
    "mi355x-8": Preset(
        mi355x_8, "8 MI355X (accelerator=MI350X): full Infinity Fabric mesh, no switch"
    ),
    "mi250x-8": Preset(
        mi250x_8, "8 MI250X = 16 GCDs on Infinity Fabric (Frontier-class node wiring)"
    ),
    "ualink-pod": Preset(
        ualink_pod, "UALink 1.0 pod: n accelerators (default 128, up to 1024), 8 switch planes"
    ),
    "h100-nvl-pair": Preset(h100_nvl_pair, "2 H100 PCIe joined by NVLink bridges"),
    "helios-72": Preset(
        helios_72, "AMD Helios (estimate): 72 MI455X, UALink over Ethernet, 36 Tomahawk Ultra"
    ),
    "gaudi3-8": Preset(gaudi3_8, "Gaudi 3 HLS-3: 8 Gaudi 3, 3 x 200GbE RoCE per pair, no switch"),
    "tpu-v5p": Preset(
        tpu_v5p, "TPU v5p slice (shape=4x4x4): 3D torus of ICI, wraparound on whole 4x4x4 cubes"
    ),
    "tpu7x": Preset(tpu7x, "TPU7x (Ironwood) slice (shape=4x4x4): 3D torus of ICI, as v5p"),
    "trn2-16": Preset(trn2_16, "trn2.48xlarge: 16 Trainium2 in a 4x4 NeuronLink-v3 torus"),
    "trn2-ultraserver": Preset(
        trn2_ultraserver, "Trn2 UltraServer: 64 Trainium2, 4 servers' 4x4 tori joined in rings"
    ),
}


def list_presets() -> dict[str, str]:
    """Preset names -> one-line descriptions, in registry order."""
    return {name: p.description for name, p in PRESETS.items()}


#: Keys of an ``Nx<preset>:...`` spec that go to :func:`multi_node`; the others go to the preset.
MULTI_NODE_KEYS = ("nic", "nics", "rail_optimized", "switch", "oversubscription")
_NX = re.compile(r"^(\d+)x(.+)$")


def parse_params(text: str, *, source: str | None = None) -> dict[str, Any]:
    """``"n=1024,hosts=true"`` -> ``{"n": 1024, "hosts": True}`` (int, float, bool, else str).

    >>> parse_params("n=8,x=0.5,rail_optimized=true,nic=ib-xdr")
    {'n': 8, 'x': 0.5, 'rail_optimized': True, 'nic': 'ib-xdr'}
    """
    params: dict[str, Any] = {}
    for item in filter(None, (p.strip() for p in text.split(","))):
        key, sep, raw = item.partition("=")
        key = key.strip()
        if not sep or not key:
            raise UsageError(
                f"preset parameter {item!r} is not key=value", source=source, entry=item
            )
        params[key] = _value(raw.strip())
    return params


def _value(raw: str) -> Any:
    if raw.lower() in ("true", "false"):
        return raw.lower() == "true"
    for convert in (int, float):
        try:
            return convert(raw)
        except ValueError:
            pass
    return raw


def _check_keys(builder: Callable[..., Any], params: dict[str, Any], source: str) -> None:
    signature = inspect.signature(builder).parameters
    accepted = [p for p in signature if p not in ("topology",)]
    for key, value in params.items():
        if key not in accepted:
            hint = f"; it takes {', '.join(accepted)}" if accepted else "; it takes no parameters"
            raise UsageError(f"unknown parameter {key!r}{hint}", source=source, entry=key)
        default = signature[key].default
        if not _same_kind(default, value):
            kind = type(default).__name__
            raise UsageError(
                f"parameter {key!r} must be {kind}, got {value!r}", source=source, entry=key
            )


def _same_kind(default: Any, value: Any) -> bool:
    """A parameter whose default is a flag or a number must be given as one (``n=abc`` is not)."""
    if isinstance(default, bool):
        return isinstance(value, bool)
    if isinstance(default, int):
        return isinstance(value, int) and not isinstance(value, bool)
    if isinstance(default, float):
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    return True


def build_preset(name: str, **params: Any) -> Topology:
    """Build the preset ``name`` with builder keyword ``params`` (cached: topologies are
    immutable, and the simulator asks for the same ones often)."""
    if name not in PRESETS:
        close = difflib.get_close_matches(name, list(PRESETS), n=3, cutoff=0.5)
        hint = f" (did you mean {', '.join(close)}?)" if close else " (see `scaleup topo list`)"
        raise UnknownPreset(f"no preset named {name!r}{hint}", source=name)
    _check_keys(PRESETS[name].builder, params, name)
    try:
        return _build_cached(name, tuple(sorted(params.items())))
    except ScaleupError as error:
        raise _naming(error, name, params) from None


def _naming(error: ScaleupError, spec: str, keys: Any) -> ScaleupError:
    """``error`` from a builder, re-pointed at the spec the user typed when it names one of the
    builder's parameters (``source="planes"`` -> ``ualink-pod:planes=0: planes: ...``)."""
    field = error.source if error.source is not None else error.entry
    if field in keys:
        error.source, error.entry = spec, field
        error.args = (error.one_line(),)
    return error


@functools.lru_cache(maxsize=64)
def _build_cached(name: str, items: tuple[tuple[str, Any], ...]) -> Topology:
    return PRESETS[name].builder(**dict(items))


def resolve_topology(text: str) -> Topology:
    """A topology from what a user typed: a preset name, ``name:key=value,...``,
    ``Nx<preset>[:key=value,...]`` or a path to a ``.toml`` file.

    In an ``Nx`` spec the keys ``nic``, ``nics``, ``rail_optimized``, ``switch`` and
    ``oversubscription`` go to :func:`~scaleup.topology.generators.multi_node` (e.g.
    ``2048xdgx-h100:oversubscription=2``: a three-tier fat tree of 16,384 NICs whose leaves have
    twice as many ports down as up), the others to the preset's builder.

    >>> resolve_topology("2xdgx-h100").ranks_per_node
    8
    """
    text = text.strip()
    limits.check_at_most(
        len(text), limits.MAX_SPEC_CHARS, source="topology", name="MAX_SPEC_CHARS",
        what="characters",
    )  # fmt: skip
    if text.endswith(".toml") or _is_file(text):
        from scaleup.topology.io import load_topology  # noqa: PLC0415 - io imports this module

        return load_topology(text)
    head, _, rest = text.partition(":")
    limits.check_at_most(
        len(head), limits.MAX_NAME_CHARS, source="topology", name="MAX_NAME_CHARS",
        what="characters in the preset name",
    )  # fmt: skip
    params = parse_params(rest, source=text)
    match = _NX.match(head)
    if match and head not in PRESETS:
        n, base = int(match.group(1)), match.group(2)
        node_params = {k: params.pop(k) for k in list(params) if k in MULTI_NODE_KEYS}
        _check_keys(multi_node, node_params, text)
        try:
            return _multi_cached(
                n, base, tuple(sorted(params.items())), tuple(sorted(node_params.items()))
            )
        except ScaleupError as error:
            raise _naming(error, text, ("n", *node_params)) from None
    return build_preset(head, **params)


def _is_file(text: str) -> bool:
    """Whether ``text`` names an existing file (False for what cannot be a path at all)."""
    try:
        return Path(text).is_file()
    except (OSError, ValueError):  # a name too long for the file system, a NUL byte
        return False


@functools.lru_cache(maxsize=32)
def _multi_cached(
    n: int, base: str, items: tuple[tuple[str, Any], ...], node_items: tuple[tuple[str, Any], ...]
) -> Topology:
    return multi_node(build_preset(base, **dict(items)), n, **dict(node_items))
