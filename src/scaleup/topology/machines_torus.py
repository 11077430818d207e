"""Direct-network machines: Google TPU slices (3D torus of ICI links) and AWS Trainium2 servers
(NeuronLink-v3 torus), built with :func:`~scaleup.topology.torus.torus`.

Ranks follow the torus convention (dimension 0 fastest: rank ``x + X*(y + Y*z)``). No switch
chips: every hop is a chip-to-chip link, and traffic between non-neighbours is forwarded by the
chips on the way (see docs/models.md, "Routes on a torus").

Sources are in the catalog entries (``TPU-v5p``, ``TPU7x``, ``Trn2``, ``ici``, ``neuronlink3``)
and summarised in docs/topologies.md.
"""

from __future__ import annotations

import math

from scaleup.errors import UsageError
from scaleup.topology.model import Topology
from scaleup.topology.torus import parse_shape, torus

__all__ = ["tpu7x", "tpu_slice_wrap", "tpu_v5p", "trn2_16", "trn2_ultraserver"]

#: Chips per side of a TPU cube (v4/v5p/TPU7x: 4x4x4 = 64 chips joined by optical circuit
#: switches, which close the torus only around whole cubes).
CUBE_SIDE = 4


def tpu_slice_wrap(dims: tuple[int, ...]) -> bool:
    """Whether a TPU slice of shape ``dims`` has wraparound links: a whole number of 4x4x4
    cubes ('All 4x4x4 and larger slices (one cube) have full 3D torus', cloud.google.com/tpu/
    docs/v5p); smaller slices (2x2x1, 2x2x2, 2x4x4) are meshes.

    >>> tpu_slice_wrap((4, 4, 8)), tpu_slice_wrap((2, 4, 4))
    (True, False)
    """
    return all(k % CUBE_SIDE == 0 for k in dims)


def _tpu_slice(name: str, accelerator: str, shape: str, pod_chips: int) -> Topology:
    dims = parse_shape(shape)
    if len(dims) != 3:
        raise UsageError(
            f"a TPU slice shape has 3 sizes (e.g. 4x4x8), got {shape!r}", source="shape"
        )
    if any(k > CUBE_SIDE for k in dims) and not tpu_slice_wrap(dims):
        raise UsageError(
            f"slice {shape!r}: beyond one cube a slice is whole 4x4x4 cubes (each size a "
            "multiple of 4)",
            source="shape",
        )
    if math.prod(dims) > pod_chips:
        raise UsageError(f"slice {shape!r} is larger than a {pod_chips}-chip pod", source="shape")
    wrap = tpu_slice_wrap(dims)
    label = "x".join(map(str, dims))
    desc = (
        f"{accelerator} slice {label}: {math.prod(dims)} chips, 3D "
        + ("torus (whole cubes: wraparound)" if wrap else "mesh (sub-cube: no wraparound)")
        + ", 1 ICI link per neighbour"
    )
    return torus(dims, accelerator, wrap=wrap, name=name, description=desc)


def tpu_v5p(shape: str = "4x4x4") -> Topology:
    """A Cloud TPU v5p slice of ``shape`` (``XxYxZ`` chips; default one 4x4x4 cube).

    Each chip has 6 ICI links (2 per dimension) at 100 GB/s per direction; slices of whole
    4x4x4 cubes are tori, smaller ones meshes (:func:`tpu_slice_wrap`). Pod: 8,960 chips.
    Source: cloud.google.com/tpu/docs/v5p (see the catalog entry ``TPU-v5p``).
    """
    return _tpu_slice("tpu-v5p", "TPU-v5p", shape, 8960)


def tpu7x(shape: str = "4x4x4") -> Topology:
    """A TPU7x (Ironwood) slice of ``shape``: wired as :func:`tpu_v5p` (3D torus of 4x4x4
    cubes; 1,200 GB/s bidirectional ICI per chip). Pod: 9,216 chips.
    Source: cloud.google.com/tpu/docs/tpu7x (see the catalog entry ``TPU7x``)."""
    return _tpu_slice("tpu7x", "TPU7x", shape, 9216)


def trn2_16() -> Topology:
    """One trn2.48xlarge: 16 Trainium2 chips in a 4 x 4 2D torus of NeuronLink-v3 (4 links per
    chip, 160 GB/s per direction each, an estimate). Source: AWS Neuron docs ('NeuronLink-v3's
    4 x 4 torus'; see the catalog entries ``Trn2`` and ``neuronlink3``)."""
    return torus(
        (4, 4),
        "Trn2",
        name="trn2-16",
        description="trn2.48xlarge: 16 Trainium2 in a 4x4 NeuronLink-v3 torus",
    )


def trn2_ultraserver() -> Topology:
    """A Trn2 UltraServer: 4 trn2.48xlarge (64 chips), each a 4 x 4 torus, chip ``(x, y)`` of
    every server joined in a ring with chip ``(x, y)`` of the others: a 4 x 4 x 4 torus whose
    dimension 2 is the server (rank = local rank + 16 x server). Source: AWS Neuron docs via
    the wave-2 notes ('UltraServer 64 chips (ring across 4 servers)'); the ring's per-chip
    links and rate are estimates (catalog ``Trn2.link_count``)."""
    return torus(
        (4, 4, 4),
        "Trn2",
        name="trn2-ultraserver",
        description="Trn2 UltraServer: 4 x trn2.48xlarge (4x4 tori) joined in NeuronLink rings",
    )
