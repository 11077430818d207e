"""Fat trees of one switch chip: the scale-out fabric of
:func:`~scaleup.topology.generators.multi_node` and the multi-tier planes of
:func:`~scaleup.topology.generators.switched`.

A fat tree here is built from one catalog switch chip of radix ``R`` (its ``port_count``), with
the **fewest tiers** that hold the endpoints:

* **one tier** -- one switch, when every endpoint link fits its ``R`` ports;
* **two tiers** (leaf/spine) -- leaves with ``d`` ports down (see below) and ``u = ceil(d / o)``
  up, at most ``R`` leaves, each wired to every spine with ``u / S`` links, ``S`` the fewest
  spines that divide ``u`` and fit the spine's ports (``L * u / S <= R``). Holds ``R * d``
  endpoint links: ``R * R / 2`` = 2,048 NICs of a 64-port switch at 1:1;
* **three tiers** (leaf/spine/core, the k-ary fat tree of Al-Fares et al., SIGCOMM 2008,
  generalised) -- leaves split as evenly as possible into pods of at most ``R / 2`` leaves; every
  pod has ``S`` spines (the fewest dividing ``u`` with at most ``R / 2`` ports down), each spine
  with as many ports up as down; spine ``j`` of every pod joins the ``C`` cores of core group
  ``j``, the fewest that divide its uplinks and fit a core's ports. Holds ``R * R / 2 * d``
  endpoint links: 65,536 NICs of a 64-port switch at 1:1, four times
  :data:`~scaleup.limits.MAX_RANKS`. Beyond three tiers a :class:`~scaleup.errors.UsageError`.

**Oversubscription** ``o`` (a positive number; 1 is non-blocking) applies at the leaves only, as
it is quoted for leaf (top-of-rack) switches: a leaf has the most ports down ``d`` with
``d + ceil(d / o) <= R`` (1:1 on 64 ports: 32 down, 32 up; 2:1: 42 down, 21 up; 3:1: 48 down,
16 up), and ``ceil(down / o)`` ports up for the most links any leaf has down. The spine and core
tiers are non-blocking. A one-switch fabric has no uplinks, so ``o`` does not change it.

**Aggregation.** Every switch is its own device (so the catalog's ``port_count`` is checked on
each, as on any other switch); the parallel links between one leaf and one spine (or one spine
and one core) are one :class:`~scaleup.topology.model.Link` entry with ``count=k``, merged into
one channel per direction. Grouping identical spines into one device of summed capacity would
cut a few hundred devices at most but break the per-chip port check; it is not needed for
speed: the simulator (:mod:`scaleup.sim.network`) splits a transfer over all next hops on a
shortest path in proportion to channel bandwidth (at most ``MAX_ECMP_FANOUT`` = 64 per node,
above the ``R / 2`` spines or cores a switch here fans out to), so equal spines share load
evenly, as ECMP or adaptive routing would. 16,384 NICs on 64-port switches take 512 leaves,
512 spines and 256 cores (1,280 devices, 36,864 link entries).

Ids (``prefix`` ``net.`` in :func:`~scaleup.topology.generators.multi_node`): leaves are named
by the caller (``net.sw0`` for one switch, ``net.leaf{i}``, ``net.rail{r}``,
``net.group{g}.rail{r}``); spines ``{prefix}spine{j}`` in two tiers and
``{prefix}pod{p}.spine{j}`` in three; cores ``{prefix}core{c}`` (group ``c // C``).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from fractions import Fraction

from scaleup import hardware
from scaleup.errors import UsageError
from scaleup.topology.model import Device, Link, NodeKind

__all__ = ["FatTree", "build_fat_tree", "leaf_down_ports", "plan_fat_tree"]


@dataclass(frozen=True)
class FatTree:
    """The shape of a fat tree, computed from counts alone, before anything is built.

    ``leaf_down``: links down per leaf; ``up``: links up per leaf (0 in one tier); ``pods``:
    leaves per pod (one pod in two tiers, none in one); ``spines_per_pod``; ``cores_per_group``
    (0 below three tiers; there is one core group per spine of a pod).
    """

    radix: int
    oversubscription: float
    leaf_down: tuple[int, ...]
    up: int = 0
    pods: tuple[int, ...] = ()
    spines_per_pod: int = 0
    cores_per_group: int = 0

    @property
    def tiers(self) -> int:
        """1, 2 or 3."""
        return 1 if not self.pods else 3 if self.cores_per_group else 2

    @property
    def leaf_spine_links(self) -> int:
        """Parallel links between one leaf and one spine of its pod."""
        return self.up // self.spines_per_pod if self.spines_per_pod else 0

    @property
    def spine_up(self) -> int:
        """Links up per spine in three tiers (as many as the fullest pod's spine has down)."""
        return max(self.pods) * self.leaf_spine_links if self.cores_per_group else 0

    @property
    def spine_core_links(self) -> int:
        """Parallel links between one spine and one core of its group."""
        return self.spine_up // self.cores_per_group if self.cores_per_group else 0

    @property
    def switches_per_tier(self) -> tuple[int, ...]:
        """Switch count per tier, leaves first."""
        counts = [len(self.leaf_down)]
        if self.pods:
            counts.append(len(self.pods) * self.spines_per_pod)
        if self.cores_per_group:
            counts.append(self.spines_per_pod * self.cores_per_group)
        return tuple(counts)

    @property
    def links_between_switches(self) -> int:
        """Link entries between switch tiers (each may carry ``count > 1``)."""
        n = len(self.leaf_down) * self.spines_per_pod
        return n + len(self.pods) * self.spines_per_pod * self.cores_per_group


def leaf_down_ports(radix: int, oversubscription: float = 1.0) -> int:
    """Most ports a leaf of ``radix`` ports can have down at ``oversubscription``: the largest
    ``d`` with ``d + ceil(d / o) <= radix``.

    >>> leaf_down_ports(64), leaf_down_ports(64, 2), leaf_down_ports(64, 3)
    (32, 42, 48)
    """
    o = _ratio(oversubscription)
    d = radix
    while d > 0 and d + math.ceil(Fraction(d) / o) > radix:
        d -= 1
    if d == 0:
        raise UsageError(
            f"{oversubscription:g} leaves a {radix}-port leaf no port down; "
            f"use at least 1/{radix - 1}",
            entry="oversubscription",
        )
    return d


def plan_fat_tree(leaf_down: Sequence[int], radix: int, oversubscription: float = 1.0) -> FatTree:
    """The fewest-tier fat tree over leaves with ``leaf_down`` links down each (see the module
    docstring). One leaf is a one-switch fabric.

    >>> t = plan_fat_tree([2] * 8, radix=4)  # the k = 4 fat tree: 16 hosts, 20 switches
    >>> t.tiers, t.switches_per_tier
    (3, (8, 8, 4))
    """
    o = _ratio(oversubscription)
    leaves = len(leaf_down)
    if leaves == 1:
        return FatTree(radix, float(oversubscription), tuple(leaf_down))
    up = math.ceil(Fraction(max(leaf_down)) / o)
    spines = _fewest_divisor(up, lambda s: leaves * (up // s) <= radix)
    if spines is not None:
        return FatTree(radix, float(oversubscription), tuple(leaf_down), up, (leaves,), spines)
    half = radix // 2
    n_pods = math.ceil(leaves / half)
    if n_pods > radix:
        raise UsageError(
            f"{sum(leaf_down)} endpoint links need more than three tiers of {radix}-port "
            f"switches; three tiers hold at most {radix * half * max(leaf_down)}",
        )
    pods = tuple(leaves // n_pods + (1 if p < leaves % n_pods else 0) for p in range(n_pods))
    per_pod = _fewest_divisor(up, lambda s: max(pods) * (up // s) <= half)
    if per_pod is None:  # up <= radix - d < radix, so s = up always fits; kept for safety
        raise UsageError(f"a leaf's {up} uplinks do not fit the spines of a {radix}-port pod")
    spine_up = max(pods) * (up // per_pod)
    cores = _fewest_divisor(spine_up, lambda c: n_pods * (spine_up // c) <= radix)
    if cores is None:  # n_pods <= radix, so c = spine_up always fits; kept for safety
        raise UsageError(f"{n_pods} pods do not fit the cores of {radix}-port switches")
    return FatTree(radix, float(oversubscription), tuple(leaf_down), up, pods, per_pod, cores)


def build_fat_tree(
    groups: Sequence[Sequence[tuple[str, int]]],
    leaf_ids: Sequence[str],
    plan: FatTree,
    switch: str,
    tech: str,
    prefix: str,
) -> tuple[list[Device], list[Link]]:
    """The switches and links of ``plan``: leaf ``i`` (id ``leaf_ids[i]``) takes the endpoints
    ``groups[i]`` (``(device id, links)``), then the spine and core tiers as planned."""
    kind = NodeKind(hardware.device_kind(switch))
    leaves = [Device(x, switch, kind) for x in leaf_ids]
    links = [Link(e, leaves[i].id, tech, c) for i, g in enumerate(groups) for e, c in g]
    if plan.tiers == 1:
        return leaves, links
    k = plan.leaf_spine_links
    if plan.tiers == 2:
        spines = [Device(f"{prefix}spine{j}", switch, kind) for j in range(plan.spines_per_pod)]
        links += [Link(leaf.id, s.id, tech, k) for leaf in leaves for s in spines]
        return leaves + spines, links
    cores = [
        Device(f"{prefix}core{c}", switch, kind)
        for c in range(plan.spines_per_pod * plan.cores_per_group)
    ]
    spines, up_links = [], []
    first = 0
    for p, size in enumerate(plan.pods):
        pod = [Device(f"{prefix}pod{p}.spine{j}", switch, kind) for j in range(plan.spines_per_pod)]
        links += [
            Link(leaf.id, s.id, tech, k) for leaf in leaves[first : first + size] for s in pod
        ]
        first += size
        group = plan.cores_per_group
        up_links += [
            Link(s.id, cores[j * group + c].id, tech, plan.spine_core_links)
            for j, s in enumerate(pod)
            for c in range(group)
        ]
        spines += pod
    return leaves + spines + cores, links + up_links


def _fewest_divisor(n: int, fits: Callable[[int], bool]) -> int | None:
    """The smallest divisor ``s`` of ``n`` with ``fits(s)``, or None."""
    return next((s for s in range(1, n + 1) if n % s == 0 and fits(s)), None)


def _ratio(oversubscription: float) -> Fraction:
    """``oversubscription`` as an exact fraction; a one-line error naming it unless it is a
    finite positive number."""
    value = oversubscription
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float))
        or not math.isfinite(value)
        or value <= 0
    ):
        raise UsageError(
            f"must be a positive number (leaf ports down per port up), got {value!r}",
            entry="oversubscription",
        )
    return Fraction(value)
