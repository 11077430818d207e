"""Predicates of a group of ranks, as the tuner's enable rules ask them (NVLS, LL128, links).

Split from :mod:`scaleup.topology.analysis` (which re-exports them): each takes an optional
``ranks`` (indices into ``accelerators``: the group the question is about, default all) and reads
the catalog's typed link fields (``family``, ``scope``), never the spelling of a name.
"""

from __future__ import annotations

from collections.abc import Sequence

from scaleup import hardware
from scaleup.topology.model import Channel, Device, NodeKind, Topology

__all__ = [
    "is_full_mesh",
    "is_scale_up_link",
    "links_per_accelerator",
    "nvlink_class",
    "nvls_capable",
    "nvls_tree_capable",
    "rank_nodes",
]


def _rank_devices(t: Topology, ranks: Sequence[int] | None) -> list[Device]:
    accs = t.accelerators
    return list(accs) if ranks is None else [accs[r] for r in ranks]


def _channels_out(t: Topology, devices: list[Device]) -> dict[str, list[Channel]]:
    """The channels leaving each of ``devices``, in ``t.channels`` order."""
    leaving = t.channels_from
    return {d.id: list(leaving.get(d.id, ())) for d in devices}


def rank_nodes(t: Topology, ranks: Sequence[int] | None = None) -> tuple[int, ...]:
    """The server (``Device.node``) of every rank of the group."""
    return tuple(int(d.node) for d in _rank_devices(t, ranks))


def nvls_capable(t: Topology, ranks: Sequence[int] | None = None) -> bool:
    """Whether in-switch reduction (NVLink SHARP, or any scale-up switch the catalog marks as
    reducing: UALink 2.0 in-network compute, Tomahawk Ultra's in-switch collectives) applies to
    the group: peer access on, every rank in one server (or switch domain), and every switch a
    rank's scale-up links reach reduces in the switch (links to hosts or NICs and scale-out links
    are left out). A rank with no scale-up switch at all does not qualify."""
    if not t.peer_access:
        return False
    devices = _rank_devices(t, ranks)
    if len({d.node for d in devices}) > 1:
        return False
    return all(_reduces_in_switch(t, chs) for chs in _channels_out(t, devices).values())


def _reduces_in_switch(t: Topology, channels: list[Channel]) -> bool:
    """Whether a rank with these out-channels reaches scale-up switches, all reducing."""
    ends = [t.device(c.dst) for c in channels if is_scale_up_link(c.tech)]
    specs = [hardware.switch_chip(d.type) for d in ends if d.kind is NodeKind.SWITCH]
    return bool(specs) and all(s.in_switch_reduction for s in specs)


def is_scale_up_link(tech: str) -> bool:
    """Whether a link technology is a scale-up link (the catalog's scope; NVLink-family links
    count whatever their scope, as NVLink SHARP did before scopes were consulted)."""
    link = hardware.link_tech(tech)
    return str(link.scope) == "scale-up" or str(link.family) == "nvlink"


def nvls_tree_capable(t: Topology, ranks: Sequence[int] | None = None) -> bool:
    """Whether NVLS-Tree applies to the group: it spans more than one server and, inside every
    server, its ranks are :func:`nvls_capable` (NVLink SHARP switches reduce for every rank
    there). Whether the servers' NICs suffice is the tuner's business (one head per NIC)."""
    if not t.peer_access:
        return False
    devices = _rank_devices(t, ranks)
    if len({int(d.node) for d in devices}) < 2:
        return False
    # nvls_capable of every server's ranks, with the channels gathered in one pass (once per
    # server would be servers x channels: minutes at 16,384 GPUs)
    return all(_reduces_in_switch(t, chs) for chs in _channels_out(t, devices).values())


def nvlink_class(t: Topology, ranks: Sequence[int] | None = None) -> bool:
    """Whether every rank of the group has an NVLink-family link (NCCL's LL128 enable rule:
    LL128 on NVLink paths, never over PCIe-only or host-staged paths); False without peer
    access."""
    if not t.peer_access:
        return False
    channels = _channels_out(t, _rank_devices(t, ranks))
    return all(any(_family(c.tech) == "nvlink" for c in out) for out in channels.values())


def links_per_accelerator(t: Topology, ranks: Sequence[int] | None = None) -> int:
    """Fewest scale-up links (``scope == "scale-up"``, counted with multiplicity) of any rank of
    the group; 0 for an empty group."""
    channels = _channels_out(t, _rank_devices(t, ranks))
    counts = [
        sum(c.count for c in out if hardware.link_tech(c.tech).scope == "scale-up")
        for out in channels.values()
    ]
    return min(counts, default=0)


def is_full_mesh(t: Topology, ranks: Sequence[int] | None = None) -> bool:
    """Whether the group has more than two ranks and every ordered pair is directly linked."""
    ids = [d.id for d in _rank_devices(t, ranks)]
    index = t.channel_index
    return len(ids) > 2 and all((a, b) in index for a in ids for b in ids if a != b)


def _family(tech: str) -> str:
    return str(hardware.link_tech(tech).family)
