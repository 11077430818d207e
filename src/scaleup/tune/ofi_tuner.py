"""aws-ofi-nccl's region tuner: the (algorithm, protocol) the EFA network plugin makes NCCL run.

EFA runs only through the aws-ofi-nccl network plugin, and NCCL 2.21 and later load a tuner
from the network plugin when ``NCCL_TUNER_PLUGIN`` is unset (aws/aws-ofi-nccl src/Makefile.am
lines 87-97 at v1.16.3: "By bundling the tuner in the net plugin, we cause the tuner to be used
by default"). Its default tuner (``OFI_NCCL_TUNER_TYPE=Region``, include/nccl_ofi_param.h line
294) covers the plane of (message bytes, ranks) with polygons, each naming an (algorithm,
protocol) (src/tuner/nccl_ofi_regions.cpp). For a point inside one, or on its edge, the first
such region in order whose pair NCCL has not ruled out gets cost 0 in NCCL's cost table, so NCCL
runs it (``region_get_coll_info_internal_v3``, lines 1328-1407); a region NCCL rules out is
skipped. Outside every region, and on two nodes or fewer ("the regions are not well defined"),
NCCL's own model decides.

Modelled: p5.48xlarge and p5e.48xlarge (``NCCL_OFI_TUNER_P5_P5E``: H100 or H200 with the
``efa-400g`` NIC, the catalog's NIC for those instances), all_reduce with 8 ranks a node
(``region_init_internal_p5_p5e``, lines 615-707). Not modelled: p5en and p6 (no catalog NIC
for their EFA), the tables for 1 and 2 ranks a node (a group here is each server's first
accelerators, so every multi-node p5 group has 8 a node), the plugin's channel override (p6
only) and its Model tuner (``OFI_NCCL_TUNER_TYPE=Model``).
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass
from fractions import Fraction

from scaleup.topology import analysis
from scaleup.topology.model import Topology
from scaleup.tune.ofi_env import P5, ofi_platform

__all__ = ["P5_ALL_REDUCE", "OfiRegionTuner", "Region", "extend_region", "in_region"]

#: The plugin's far corner of the plane (include/tuner/nccl_ofi_tuner_region.h lines 49, 54).
TUNER_MAX_SIZE = 100.0 * 1024 * 1024 * 1024
TUNER_MAX_RANKS = 1024.0 * 1024
#: What the plugin calls itself, for explanations.
PLUGIN = "aws-ofi-nccl region tuner"

Point = tuple[float, float]


def extend_region(a: Point, b: Point, z: Point) -> Point:
    """The point of line ``a``-``b`` farthest along it inside the box to ``z``: the plugin's
    ``extend_region`` (nccl_ofi_regions.cpp), which runs a region's last edge out to the plane's
    far corner."""
    if a[0] == b[0]:
        return (a[0], z[1])
    if a[1] == b[1]:
        return (z[0], a[1])
    m = (a[1] - b[1]) / (a[0] - b[0])
    c = b[1] - m * b[0]
    projected = m * z[0] + c
    return (z[0], projected) if projected < z[1] else ((z[1] - c) / m, z[1])


@dataclass(frozen=True)
class Region:
    """A polygon of (bytes, ranks) vertices and the (scaleup algorithm, protocol) it names."""

    algorithm: str
    protocol: str
    vertices: tuple[Point, ...]


def _on_segment(p: tuple[Fraction, Fraction], a: Point, b: Point) -> bool:
    ax, ay, bx, by = (Fraction(v) for v in (*a, *b))
    x, y = p
    cross = (bx - ax) * (y - ay) - (by - ay) * (x - ax)
    return cross == 0 and min(ax, bx) <= x <= max(ax, bx) and min(ay, by) <= y <= max(ay, by)


def in_region(point: Point, vertices: Sequence[Point]) -> bool:
    """Whether ``point`` lies inside the polygon or on its boundary, as the plugin's
    ``is_inside_region`` counts it (an edge point is inside, so a degenerate region of
    repeated vertices still holds the points on it). Exact rational arithmetic: sizes reach
    1e11 and a cross product of such coordinates is past float64's integers. Hand-written
    because matplotlib's ``Path.contains_point`` leaves boundary points undefined."""
    x, y = Fraction(point[0]), Fraction(point[1])
    n = len(vertices)
    edges = [(vertices[i], vertices[(i + 1) % n]) for i in range(n)]
    if any(_on_segment((x, y), a, b) for a, b in edges):
        return True
    inside = False
    for a, b in edges:  # even-odd rule, a ray from the point towards +x
        ay, by = Fraction(a[1]), Fraction(b[1])
        if (ay > y) != (by > y):
            ax, bx = Fraction(a[0]), Fraction(b[0])
            if x < ax + (y - ay) * (bx - ax) / (by - ay):
                inside = not inside
    return inside


def _p5_all_reduce() -> tuple[Region, ...]:
    """p5 / p5e, all_reduce, 8 ranks a node: nccl_ofi_regions.cpp lines 615-707 (v1.16.3), in
    the plugin's order (the first region holding a point wins)."""
    corner = (TUNER_MAX_SIZE, TUNER_MAX_RANKS)
    tree_ll128_end = extend_region((402653184, 2048), (402653184, 4096), corner)
    nvls_tree_end_1 = extend_region((8053063680, 160), (9663676416, 192), corner)
    nvls_tree_end_2 = extend_region((402653184, 2048), (402653184, 4096), corner)
    ring_simple_end = extend_region((8053063680, 160), (9663676416, 192), corner)
    tree_ll128 = (
        (0, 16), (31457280, 16), (37748736, 32), (117440512, 64), (301989888, 128),
        (301989888, 256), (335544320, 512), (536870912, 1024), (402653184, 2048),
        (402653184, 4096), tree_ll128_end, (0, tree_ll128_end[1]),
    )  # fmt: skip
    nvls_tree_16 = ((31457281, 16), (TUNER_MAX_SIZE, 16), (31457281, 16))
    ring_ll128 = (
        (31457280, 17), (1073741824, 17), (2147483648, 64), (2147483648, 128),
        (1342177280, 160), (2147483648, 256), (1074790400, 256), (444596224, 160),
        (301989888, 128), (117440512, 64), (37748736, 32),
    )  # fmt: skip
    nvls_tree = (
        (2147483648, 128), (6442450944, 128), (8053063680, 160), (9663676416, 192),
        nvls_tree_end_1, nvls_tree_end_2, (402653184, 4096), (402653184, 2048),
        (536870912, 1024), (335544320, 512), (301989888, 256), (310378496, 160),
        (444596224, 160), (1074790400, 256), (2684354560, 256), (2147483648, 224),
        (1342177280, 160),
    )  # fmt: skip
    ring_simple = (
        (1073741824, 17), (ring_simple_end[0], 17), ring_simple_end, (9663676416, 192),
        (8053063680, 160), (2684354560, 64), (1610612736, 32),
    )  # fmt: skip
    return (
        Region("tree", "ll128", tree_ll128),
        Region("nvls_tree", "simple", nvls_tree_16),
        Region("ring", "ll128", ring_ll128),
        Region("nvls_tree", "simple", nvls_tree),
        Region("ring", "simple", ring_simple),
    )


#: p5 / p5e all_reduce regions, 8 ranks a node.
P5_ALL_REDUCE: tuple[Region, ...] = _p5_all_reduce()


@dataclass(frozen=True)
class OfiRegionTuner:
    """The plugin's regions for one communicator (``nranks`` ranks on ``nnodes`` nodes)."""

    nranks: int
    nnodes: int
    regions: dict[str, tuple[Region, ...]]

    @classmethod
    def of(cls, topology: Topology, ranks: Sequence[int] | None = None) -> OfiRegionTuner | None:
        """The tuner where the plugin runs its regions for this group: a p5 / p5e platform
        (every rank an H100 or H200 whose servers reach the network through ``efa-400g``
        NICs), 8 ranks on every node, more than two nodes; else None (NCCL's model)."""
        nodes = analysis.rank_nodes(topology, ranks)
        servers = set(nodes)
        if len(servers) <= 2 or any(nodes.count(s) != 8 for s in servers):
            return None
        if ofi_platform(topology, ranks) != P5:
            return None
        return cls(len(nodes), len(servers), {"all_reduce": P5_ALL_REDUCE})

    def pick(
        self, collective: str, nbytes: int, allowed: Collection[tuple[str, str]]
    ) -> tuple[str, str] | None:
        """The (algorithm, protocol) the plugin sets to cost 0 at ``nbytes``: the first region
        holding (``nbytes``, ranks) whose pair is in ``allowed`` (NCCL's enabled entries);
        None where no region holds it (NCCL's model decides)."""
        point = (float(nbytes), float(self.nranks))
        for region in self.regions.get(collective, ()):
            pair = (region.algorithm, region.protocol)
            if pair in allowed and in_region(point, region.vertices):
                return pair
        return None
