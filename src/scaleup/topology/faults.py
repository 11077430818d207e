"""Failed and degraded links: a damaged copy of a Topology, for "what if a cable breaks" studies.

A :class:`LinkFault` names a pair of devices, ``A-B`` (ids as ``scaleup topo show`` and topology
files write them: ``g0-g1``, ``g0-sw0``, ``n0.g0-n0.sw0``), and what happened to **every physical
link between them, both directions**:

* ``factor == 0``: the links failed and are removed (``--fail-link A-B``, ``failed = true``);
* ``0 < factor <= 1``: the links are degraded, their bandwidth multiplied by ``factor``
  (``--degrade A-B=0.5``, ``degrade = 0.5``). A degraded link keeps its technology and latency
  and gets a per-link ``bandwidth_gb_per_s`` override, so a damaged fabric saved as TOML reads
  back equal; ``factor == 1`` leaves the link as it was.

:func:`apply_faults` returns a new, validated Topology named ``<name>+fail(A-B)+degrade(C-D=0.5)``
(a new name, so no cache keyed on the fabric mixes the damaged fabric with the whole one). The
simulator's routes (:mod:`scaleup.sim.paths`: shortest paths, split in proportion to channel
capacity) and the tuner's channel search read the channels, so both avoid a failed link and see
a degraded one's lower bandwidth. A torus that loses a link is no longer a full grid: the copy is
a plain Topology and is routed by shortest paths around the hole instead of in dimension order.

Errors name the flag (or file) and the entry: a malformed spec, an unknown device, no link
between the two devices, a factor outside (0, 1], one pair named twice, or faults that
disconnect an accelerator from the others (a :class:`~scaleup.errors.UsageError` by default).

>>> from scaleup.topology import resolve_topology
>>> t = apply_faults(resolve_topology("dgx1-v100"), parse_faults(["g0-g1"], ["g0-g2=0.5"]))
>>> t.name, len(t.links)
('dgx1-v100+fail(g0-g1)+degrade(g0-g2=0.5)', 15)
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from scaleup import limits
from scaleup.errors import InputError, UsageError
from scaleup.topology.elements import Link, _tech
from scaleup.topology.model import Topology
from scaleup.topology.torus import TorusTopology

__all__ = [
    "DEGRADE_FLAG",
    "FAIL_FLAG",
    "LinkFault",
    "apply_faults",
    "fault_suffix",
    "parse_degrade",
    "parse_faults",
    "parse_fail_link",
]

#: The CLI flags, as errors name them.
FAIL_FLAG = "--fail-link"
DEGRADE_FLAG = "--degrade"


@dataclass(frozen=True)
class LinkFault:
    """Every link between the two devices of ``pair`` (``"A-B"``) failed (``factor == 0``) or
    degraded to ``factor`` of its bandwidth. ``source``/``entry`` say where it was written (a flag
    and its value, or a file and ``faults[i]``), for errors."""

    pair: str
    factor: float
    source: str = FAIL_FLAG
    entry: str | None = None
    #: the two device ids when written apart (a file's ``a``/``b``); None: split ``pair`` at a '-'
    ends: tuple[str, str] | None = None

    @classmethod
    def between(
        cls, a: str, b: str, factor: float, *, source: str, entry: str | None = None
    ) -> LinkFault:
        """The fault of the links between ``a`` and ``b`` (ids given apart, as a file has them)."""
        return cls(f"{a}-{b}", factor, source, entry, (a, b))

    @property
    def failed(self) -> bool:
        """True when the links are removed rather than slowed."""
        return self.factor == 0.0

    def label(self) -> str:
        """``fail(A-B)`` or ``degrade(A-B=F)``, as the damaged topology's name writes it."""
        return f"fail({self.pair})" if self.failed else f"degrade({self.pair}={self.factor:g})"


def parse_fail_link(text: str, *, source: str = FAIL_FLAG) -> LinkFault:
    """``A-B`` (one ``--fail-link`` value) as a failure; the device ids are checked later, against
    the topology (an id may itself contain ``-``)."""
    pair = text.strip()
    _check_pair(pair, source, text)
    return LinkFault(pair, 0.0, source, text)


def parse_degrade(text: str, *, source: str = DEGRADE_FLAG) -> LinkFault:
    """``A-B=F`` (one ``--degrade`` value) with ``0 < F <= 1``."""
    pair, sep, value = text.strip().rpartition("=")
    if not sep:
        raise UsageError("expected A-B=F (e.g. g0-g1=0.5)", source=source, entry=text)
    _check_pair(pair.strip(), source, text)
    try:
        factor = float(value)
    except ValueError:
        raise UsageError(
            f"the factor {value.strip()!r} is not a number (A-B=F, 0 < F <= 1)",
            source=source,
            entry=text,
        ) from None
    return LinkFault(pair.strip(), check_factor(factor, source, text), source, text)


def check_factor(factor: float, source: str, entry: str | None) -> float:
    """``factor`` if ``0 < factor <= 1`` (a degrade factor), else a UsageError naming it."""
    if not (math.isfinite(factor) and 0.0 < factor <= 1.0):
        hint = f" (fail the link with {FAIL_FLAG} instead)" if factor == 0 else ""
        raise UsageError(
            f"a degrade factor must lie in (0, 1], not {factor:g}{hint}", source=source, entry=entry
        )
    return factor


def parse_faults(
    fail_links: Iterable[str] | None = None, degrades: Iterable[str] | None = None
) -> tuple[LinkFault, ...]:
    """The faults of ``--fail-link`` and ``--degrade`` (each repeatable), failures first."""
    fails = tuple(parse_fail_link(t) for t in fail_links or ())
    return fails + tuple(parse_degrade(t) for t in degrades or ())


def _check_pair(pair: str, source: str, entry: str) -> None:
    if "-" not in pair or pair.startswith("-") or pair.endswith("-"):
        raise UsageError(
            "expected two device ids joined by '-' (e.g. g0-g1, g0-sw0)", source=source, entry=entry
        )


def fault_suffix(faults: Sequence[LinkFault]) -> str:
    """``+fail(A-B)+degrade(C-D=0.5)``: what the damaged fabric's name (and a bench label) adds."""
    return "".join(f"+{f.label()}" for f in faults)


def apply_faults(
    topology: Topology, faults: Sequence[LinkFault], *, error: type[InputError] = UsageError
) -> Topology:
    """A copy of ``topology`` with the named links failed or degraded (see the module docstring).

    Raises ``error`` (``UsageError`` for flags, ``TopologyFileError`` for a file) naming the fault:
    an unknown device, no link between the pair, a pair named twice, or a fabric left with an
    accelerator cut off from the others. No faults: ``topology`` itself.
    """
    if not faults:
        return topology
    factor_of: dict[frozenset[str], float] = {}
    for fault in faults:
        a, b = _resolve_pair(topology, fault, error)
        key = frozenset((a, b))
        if key in factor_of:
            raise error(f"the link {a}-{b} is named twice", source=fault.source, entry=fault.entry)
        if not any(frozenset((x.a, x.b)) == key for x in topology.links):
            raise error(
                f"no link between {a} and {b} in {topology.name}",
                source=fault.source,
                entry=fault.entry,
            )
        factor_of[key] = fault.factor
    links = tuple(_damaged(x, factor_of.get(frozenset((x.a, x.b)), 1.0)) for x in topology.links)
    kept = tuple(x for x in links if x is not None)
    failed = [f for f in faults if f.failed]
    if failed:
        island = _cut_off(topology, kept)
        if island:
            raise error(
                f"the failed links cut {', '.join(island)} off from the other accelerators",
                source=failed[-1].source,
                entry=failed[-1].entry,
            )
    name = _name(topology.name, faults)
    if isinstance(topology, TorusTopology) and failed:
        return Topology(
            name, topology.devices, kept, topology.peer_access, topology.description,
            topology.calibration,
        )  # fmt: skip
    return dataclasses.replace(topology, name=name, links=kept)


def _cut_off(topology: Topology, links: tuple[Link, ...]) -> list[str]:
    """The accelerators of the smallest group that ``links`` leave apart from the rest (their
    ids, in rank order); empty when every accelerator still reaches every other."""
    parent = {d.id: d.id for d in topology.devices}

    def root(x: str) -> str:
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for x in links:
        parent[root(x.a)] = root(x.b)
    groups: dict[str, list[str]] = {}
    for acc in topology.accelerators:
        groups.setdefault(root(acc.id), []).append(acc.id)
    if len(groups) == 1:
        return []
    return min(groups.values(), key=len)


def _resolve_pair(topology: Topology, fault: LinkFault, error: type[InputError]) -> tuple[str, str]:
    """The two device ids of ``fault.pair``: the one split at a ``-`` whose halves both exist."""
    text = fault.pair
    splits = (
        [fault.ends]
        if fault.ends is not None
        else [
            (text[:i], text[i + 1 :])
            for i, ch in enumerate(text)
            if ch == "-" and 0 < i < len(text) - 1
        ]
    )
    known = [(a, b) for a, b in splits if _has(topology, a) and _has(topology, b)]
    if len(known) == 1:
        a, b = known[0]
        if a == b:
            raise error(f"{a}-{b} names one device twice", source=fault.source, entry=fault.entry)
        return known[0]
    if len(known) > 1:
        raise error(
            f"ambiguous: {' or '.join(f'{a} and {b}' for a, b in known)} (write the ids apart "
            "in a topology file's [[faults]] a/b)",
            source=fault.source,
            entry=fault.entry,
        )
    missing = sorted({d for pair in splits for d in pair if not _has(topology, d)})
    raise error(
        f"no device {missing[0] if missing else text!r} in {topology.name} "
        "(device ids as 'scaleup topo show' lists them)",
        source=fault.source,
        entry=fault.entry,
    )


def _has(topology: Topology, device_id: str) -> bool:
    try:
        topology.index(device_id)
    except KeyError:
        return False
    return True


def _damaged(link: Link, factor: float) -> Link | None:
    """``link`` failed (None), degraded (a bandwidth override ``factor`` x its rate) or as is."""
    if factor == 0.0:
        return None
    if factor == 1.0:
        return link
    per_link_gb_per_s = (
        float(link.bandwidth_gb_per_s)
        if link.bandwidth_gb_per_s is not None
        else float(_tech(link.tech).bandwidth_bytes_per_s) / 1e9
    )
    return dataclasses.replace(link, bandwidth_gb_per_s=per_link_gb_per_s * factor)


def _name(base: str, faults: Sequence[LinkFault]) -> str:
    """``base`` plus :func:`fault_suffix`, shortened to a count when over the name limit."""
    name = base + fault_suffix(faults)
    if len(name) <= limits.MAX_NAME_CHARS:
        return name
    return f"{base[: limits.MAX_NAME_CHARS - 24]}+{len(faults)} faults"
