"""Tori and meshes (k-ary n-cubes and their unequal cousins): the direct networks of TPU ICI and
AWS NeuronLink, as a pure builder in the style of :mod:`~scaleup.topology.generators`.

A shape ``dims = (k0, k1, ..., k{n-1})`` places ``prod(dims)`` accelerators on a grid. Rank
``r`` sits at coordinates :func:`torus_coords` ``(r, dims)``, **dimension 0 varying fastest**
(``r = x + k0 * (y + k1 * z)`` in 3-D), so a ring along dimension 0 is a run of consecutive
ranks. Each accelerator is linked to its neighbour ``+1`` in every dimension of size > 1; with
wraparound in a dimension the last is linked back to the first, making that dimension a ring.

Size-2 dimensions with wraparound: the ``+1`` and the wrap-around neighbour are the same chip,
and both cables exist, so the pair gets ``2 x links_per_pair`` links (every chip still spends 2
links per wrapped dimension, and the k-ary n-cube bisection ``2 k^(n-1)`` holds for ``k = 2``).

Closed forms the tests check against the analysis functions (k-ary n-cube, ``k`` even):

===========  ===========================  ======================
wraparound   diameter (hops)              bisection (links)
===========  ===========================  ======================
yes          ``sum(k_i // 2)``            ``2 k^(n-1)``
no           ``sum(k_i - 1)``             ``k^(n-1)``
===========  ===========================  ======================
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from scaleup import hardware, limits
from scaleup.errors import UsageError
from scaleup.topology.model import Device, Link, NodeKind, Topology

__all__ = [
    "TorusTopology", "dor_route", "parse_shape", "torus", "torus_coords", "torus_group",
    "torus_rank",
]  # fmt: skip


@dataclass(frozen=True, eq=False)
class TorusTopology(Topology):
    """A :class:`~scaleup.topology.model.Topology` that also knows its grid: ``dims`` and
    ``wrap`` per dimension (built by :func:`torus`, or read from a file's ``torus_dims`` /
    ``torus_wrap``). The simulator routes it in dimension order (:func:`dor_route`); a copy
    rebuilt without the grid (``Nx``, a sub-topology) is a plain Topology and routes by shortest
    paths. Checked on construction: the devices are exactly the ``prod(dims)`` accelerators, in
    rank order, and every pair of grid neighbours is linked."""

    dims: tuple[int, ...] = ()
    wrap: tuple[bool, ...] = ()

    def __post_init__(self) -> None:
        super().__post_init__()
        object.__setattr__(self, "dims", tuple(self.dims))
        object.__setattr__(self, "wrap", tuple(self.wrap))
        n = math.prod(self.dims)
        if not self.dims or len(self.wrap) != len(self.dims):
            raise self._error(f"torus_wrap needs one flag per size of {list(self.dims)}", None)
        if len(self.devices) != n or len(self.accelerators) != n:
            raise self._error(f"a {list(self.dims)} torus holds exactly {n} accelerators", None)
        linked = {frozenset((x.a, x.b)) for x in self.links}
        ids = [d.id for d in self.devices]
        for r in range(n):
            c = torus_coords(r, self.dims)
            for d, (k, w) in enumerate(zip(self.dims, self.wrap, strict=True)):
                if k > 1 and (w or c[d] < k - 1):
                    nxt = list(c)
                    nxt[d] = (c[d] + 1) % k
                    if frozenset((ids[r], ids[torus_rank(nxt, self.dims)])) not in linked:
                        raise self._error(
                            f"torus neighbour of {ids[r]} in dimension {d} is not linked", ids[r]
                        )

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, TorusTopology)
            and super().__eq__(other) is True
            and (self.dims, self.wrap) == (other.dims, other.wrap)
        )

    __hash__ = Topology.__hash__

    def __getstate__(self) -> dict[str, Any]:
        return {**super().__getstate__(), "dims": self.dims, "wrap": self.wrap}


def dor_route(t: TorusTopology, src: int, dst: int) -> list[int]:
    """Ranks visited from rank ``src`` to ``dst`` by dimension-order routing: dimension 0 first,
    then 1, ...; in each, the shorter way round (wraparound dimensions; ``+`` on a tie), so the
    route is a shortest path and a translate of a route is the translate's route.

    >>> dor_route(torus((4, 4), "H100", tech="nvlink4"), 0, 15)
    [0, 3, 15]
    """
    here = list(torus_coords(src, t.dims))
    goal = torus_coords(dst, t.dims)
    route = [src]
    for d, (k, w) in enumerate(zip(t.dims, t.wrap, strict=True)):
        ahead = (goal[d] - here[d]) % k
        shorter_forward = ahead <= k - ahead if w else goal[d] > here[d]
        sign = 1 if shorter_forward else -1
        while here[d] != goal[d]:
            here[d] = (here[d] + sign) % k
            route.append(torus_rank(here, t.dims))
    return route


def torus_coords(rank: int, dims: Sequence[int]) -> tuple[int, ...]:
    """Coordinates of ``rank`` in ``dims``, dimension 0 fastest.

    >>> torus_coords(5, (4, 4))
    (1, 1)
    """
    coords = []
    for k in dims:
        rank, c = divmod(rank, k)
        coords.append(c)
    return tuple(coords)


def torus_rank(coords: Sequence[int], dims: Sequence[int]) -> int:
    """The rank at ``coords`` (the inverse of :func:`torus_coords`).

    >>> torus_rank((1, 1), (4, 4))
    5
    """
    rank = 0
    for c, k in zip(reversed(coords), reversed(dims), strict=True):
        rank = rank * k + c
    return rank


def parse_shape(shape: str | Sequence[int], *, source: str = "shape") -> tuple[int, ...]:
    """``"4x4x8"`` (or a sequence of ints) -> ``(4, 4, 8)``; a UsageError for anything else.

    >>> parse_shape("4x4x8")
    (4, 4, 8)
    """
    if not isinstance(shape, (list, tuple)):
        shape = str(shape)  # a preset parameter typed as one number ("shape=4")
    if isinstance(shape, str):
        try:
            dims = tuple(int(p) for p in shape.lower().split("x"))
        except ValueError:
            raise UsageError(
                f"shape {shape!r} is not sizes joined by 'x' (e.g. 4x4x8)", source=source
            ) from None
    else:
        dims = tuple(shape)
    if not dims or any(isinstance(k, bool) or not isinstance(k, int) or k <= 0 for k in dims):
        raise UsageError(f"shape {shape!r} must be positive sizes (e.g. 4x4x8)", source=source)
    return dims


def torus(
    dims: str | Sequence[int],
    accelerator: str,
    *,
    wrap: bool | Sequence[bool] = True,
    tech: str | None = None,
    links_per_pair: int | Sequence[int] = 1,
    name: str | None = None,
    description: str = "",
) -> Topology:
    """A torus (``wrap=True``), mesh (``wrap=False``) or mix (one flag per dimension) of
    accelerators of shape ``dims``, neighbours joined by ``links_per_pair`` links (one count, or
    one per dimension) of ``tech`` (default: the accelerator's scale-up link).

    >>> t = torus((4, 4), "H100", tech="nvlink4")
    >>> len(t.accelerators), sum(x.count for x in t.links)
    (16, 32)
    >>> len(torus("4x4", "H100", tech="nvlink4", wrap=False).links)
    24
    """
    shape = parse_shape(dims, source="dims")
    n_dims = len(shape)
    wraps = _per_dim("wrap", wrap, n_dims, bool)
    counts = _per_dim("links_per_pair", links_per_pair, n_dims, int)
    for c in counts:
        if isinstance(c, bool) or c <= 0:
            raise UsageError(f"links_per_pair must be positive, got {c!r}", source="links_per_pair")
    n = math.prod(shape)
    n_links = sum(n * (k if w else k - 1) // k for k, w in zip(shape, wraps, strict=True) if k > 1)
    for value, limit, lname, what in (
        (n, limits.MAX_RANKS, "MAX_RANKS", "accelerators"),
        (n, limits.MAX_DEVICES, "MAX_DEVICES", "devices"),
        (n_links, limits.MAX_LINKS, "MAX_LINKS", "links"),
    ):
        limits.check_at_most(value, limit, source="dims", name=lname, what=what)
    if tech is None:
        link_tech = hardware.accelerator(accelerator).link_tech
        if link_tech is None:
            raise UsageError(f"{accelerator} has no scale-up link; pass tech=", source=accelerator)
        tech = str(link_tech)
    kind = NodeKind(hardware.device_kind(accelerator))
    devices = [Device(f"g{r}", accelerator, kind) for r in range(n)]
    links: list[Link] = []
    for r in range(n):
        coords = torus_coords(r, shape)
        for d, (k, w, count) in enumerate(zip(shape, wraps, counts, strict=True)):
            if k == 1 or (coords[d] == k - 1 and not w):
                continue
            if k == 2 and w:  # +1 and wrap-around are one neighbour: both cables, one entry
                if coords[d] == 0:
                    links.append(Link(f"g{r}", f"g{r + _stride(shape, d)}", tech, 2 * count))
                continue
            nxt = list(coords)
            nxt[d] = (coords[d] + 1) % k
            links.append(Link(f"g{r}", f"g{torus_rank(nxt, shape)}", tech, count))
    label = "x".join(map(str, shape))
    kind_name = "torus" if all(wraps) else "mesh" if not any(wraps) else "torus-mesh"
    return TorusTopology(
        name or f"{kind_name}-{label}",
        tuple(devices),
        tuple(links),
        description=description,
        dims=shape,
        wrap=tuple(wraps),
    )


def _stride(shape: Sequence[int], d: int) -> int:
    return math.prod(shape[:d])


def _per_dim(key: str, value: object, n_dims: int, kind: type) -> list[Any]:
    """``value`` for every dimension: one value repeated, or a sequence of ``n_dims`` values."""
    if isinstance(value, kind) and not (kind is int and isinstance(value, bool)):
        return [value] * n_dims
    if (
        isinstance(value, (list, tuple))
        and len(value) == n_dims
        and all(isinstance(v, kind) for v in value)
    ):
        return list(value)
    raise UsageError(
        f"{key} must be one {kind.__name__} or {n_dims} of them (one per dimension), got {value!r}",
        source=key,
    )


def torus_group(topology: Topology, ranks: Sequence[int] | None = None) -> tuple[int, ...] | None:
    """The grid ``dims`` of a :class:`~scaleup.topology.torus.TorusTopology` when the group is
    the whole torus in rank order (``ranks`` None or ``0..n-1``), else None: only then is rank
    ``x + k0 * (y + ...)`` the chip at ``(x, y, ...)``, as the torus algorithm lays ranks out.

    >>> from scaleup.topology import resolve_topology
    >>> torus_group(resolve_topology("trn2-16")), torus_group(resolve_topology("trn2-16"), [0, 1])
    ((4, 4), None)
    >>> torus_group(resolve_topology("dgx-h100")) is None
    True
    """
    if not isinstance(topology, TorusTopology) or not topology.dims:
        return None
    n = len(topology.accelerators)
    if ranks is not None and tuple(int(r) for r in ranks) != tuple(range(n)):
        return None
    return tuple(topology.dims)
