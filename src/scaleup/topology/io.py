"""Load and save topology TOML files; the one place lower-layer errors are mapped.

``tomllib`` and pydantic errors, ``OSError`` and the model's own rule violations all leave as
:class:`~scaleup.errors.TopologyFileError` with ``source`` = the file, ``entry`` = the offending
entry (``links[3]``, a device id, ``devices[2]``) and the broken rule as one line. No eval, no
pickle: TOML in, TOML out.

Round trip: ``load(save(t)) == t`` for every topology, and ``save(load(text)) == text`` for a
canonical file (the form :func:`dumps` writes: keys in schema order, optional keys only when
they differ from their defaults, ``count`` always written). A file's ``[[faults]]``
(:mod:`scaleup.topology.faults`) are applied on reading: the damaged fabric is what is saved.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from scaleup.errors import ScaleupError, TopologyFileError
from scaleup.files import parse_toml, read_text, validate
from scaleup.topology.faults import LinkFault, apply_faults
from scaleup.topology.model import Device, Link, Topology
from scaleup.topology.torus import TorusTopology

if TYPE_CHECKING:
    from pydantic import ValidationError

__all__ = ["dumps", "load_topology", "loads", "save_topology"]


def load_topology(path: str | Path) -> Topology:
    """Read and validate a topology file.

    Raises
    ------
    TopologyFileError
        The file cannot be read, is not TOML, or breaks a rule (naming the entry).
    """
    source = str(path)
    text = read_text(path, TopologyFileError)
    return loads(text, source=source)


def loads(text: str, *, source: str = "<string>") -> Topology:
    """Parse and validate topology TOML text (``source`` names it in errors)."""
    from scaleup.topology.schema import TopologyFile  # the file's pydantic models: files only

    data = parse_toml(text, TopologyFileError, source)
    model = validate(
        TopologyFile, data, TopologyFileError, source, locate=lambda e: _first_error(e, data)
    )
    try:
        devices = [Device.of(d.id, d.type, d.node) for d in model.devices]
        links = [
            Link(
                x.a,
                x.b,
                x.tech,
                x.count,
                None if x.bandwidth_gb_per_s is None else float(x.bandwidth_gb_per_s),
            )
            for x in model.links
        ]
        topology: Topology
        if model.torus_dims is None and model.torus_wrap is None:
            topology = Topology(
                model.name, tuple(devices), tuple(links), model.peer_access, model.description
            )
        else:
            dims = tuple(model.torus_dims or ())
            wrap = tuple(model.torus_wrap if model.torus_wrap is not None else [True] * len(dims))
            topology = TorusTopology(
                model.name, tuple(devices), tuple(links), model.peer_access, model.description,
                dims=dims, wrap=wrap,
            )  # fmt: skip
        faults = [
            LinkFault.between(
                f.a,
                f.b,
                0.0 if f.failed else float(f.degrade or 1.0),
                source=source,
                entry=f"faults[{i}]",
            )  # fmt: skip
            for i, f in enumerate(model.faults)
        ]
        return apply_faults(topology, faults, error=TopologyFileError)
    except ScaleupError as error:
        raise type(error)(error.message, source=source, entry=error.entry) from None


def _first_error(error: ValidationError, data: Any) -> tuple[str | None, str]:
    """The first pydantic error as (entry, rule): ``("links[3]", "count: must be > 0")``."""
    first = error.errors()[0]
    loc = list(first["loc"])
    entry: str | None = None
    if len(loc) >= 2 and loc[0] in ("devices", "links", "faults") and isinstance(loc[1], int):
        entry = f"{loc[0]}[{loc[1]}]"
        if loc[0] == "devices":
            raw = data.get("devices", [])[loc[1]] if isinstance(data.get("devices"), list) else None
            if isinstance(raw, dict) and isinstance(raw.get("id"), str):
                entry += f" ({raw['id']})"
        loc = loc[2:]
    field = ".".join(str(p) for p in loc)
    if first["type"] == "extra_forbidden":
        return entry, f"unknown key {field!r}"
    if first["type"] == "missing":
        return entry, f"missing key {field!r}"
    message = first["msg"].removeprefix("Value error, ")
    message = message[0].lower() + message[1:]
    return entry, f"{field}: {message}" if field else message


_ESCAPES = {
    '"': '\\"',
    "\\": "\\\\",
    "\b": "\\b",
    "\t": "\\t",
    "\n": "\\n",
    "\f": "\\f",
    "\r": "\\r",
}


def _str(value: str) -> str:
    """A TOML basic string: quotes, backslashes and control characters escaped."""
    out = []
    for ch in value:
        if ch in _ESCAPES:
            out.append(_ESCAPES[ch])
        elif ord(ch) < 0x20 or ord(ch) == 0x7F:
            out.append(f"\\u{ord(ch):04X}")
        else:
            out.append(ch)
    return '"' + "".join(out) + '"'


def _float(value: float) -> str:
    text = repr(float(value))
    return text if any(c in text for c in ".en") else text + ".0"


def dumps(topology: Topology) -> str:
    """The canonical TOML text of a topology."""
    lines = [f"name = {_str(topology.name)}"]
    if topology.description:
        lines.append(f"description = {_str(topology.description)}")
    if not topology.peer_access:
        lines.append("peer_access = false")
    if isinstance(topology, TorusTopology):
        lines.append(f"torus_dims = [{', '.join(map(str, topology.dims))}]")
        lines.append(f"torus_wrap = [{', '.join('true' if w else 'false' for w in topology.wrap)}]")
    for d in topology.devices:
        lines += ["", "[[devices]]", f"id = {_str(d.id)}", f"type = {_str(d.type)}"]
        if d.node:
            lines.append(f"node = {d.node}")
    for x in topology.links:
        lines += [
            "",
            "[[links]]",
            f"a = {_str(x.a)}",
            f"b = {_str(x.b)}",
            f"tech = {_str(x.tech)}",
            f"count = {x.count}",
        ]
        if x.bandwidth_gb_per_s is not None:
            lines.append(f"bandwidth_gb_per_s = {_float(x.bandwidth_gb_per_s)}")
    return "\n".join(lines) + "\n"


def save_topology(topology: Topology, path: str | Path) -> None:
    """Write the canonical TOML of ``topology`` to ``path``."""
    try:
        Path(path).write_text(dumps(topology), encoding="utf-8")
    except OSError as error:
        raise TopologyFileError(
            f"cannot write the file: {error.strerror or error}", source=str(path)
        ) from None
