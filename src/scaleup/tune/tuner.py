"""One call: the (algorithm, protocol, channels) NCCL would pick at one size, found by simulating.

:func:`tune` takes nccl-tests' words as keywords, builds the
:class:`~scaleup.tune.request.BenchRequest` (validated there) and runs it in a
:class:`~scaleup.tune.search.TuneSession`: a fresh one unless ``session=`` shares one between
calls. Many sizes at once: ``TuneSession().sweep(topology, BenchRequest(sizes_bytes=...))``.
"""

from __future__ import annotations

import dataclasses

from scaleup.topology.model import Topology
from scaleup.tune.request import BenchRequest
from scaleup.tune.search import TunedChoice, TuneSession

__all__ = ["tune"]


def tune(
    topology: Topology,
    collective: str,
    nbytes: int,
    *,
    dtype: str = "float32",
    nranks: int | None = None,
    algo: str | None = None,
    proto: str | None = None,
    channels: int | None = None,
    redop: str = "sum",
    root: int = 0,
    family: str = "nccl",
    session: TuneSession | None = None,
    selection: str | None = None,
) -> TunedChoice:
    """The fastest enabled (algorithm, protocol, channels) for one collective at one size.

    Parameters
    ----------
    topology
        The fabric.
    collective
        One of :data:`scaleup.collectives.spec.COLLECTIVES`.
    nbytes
        The size column of nccl-tests (bytes of the larger buffer).
    dtype, redop, root
        As nccl-tests' ``-d``, ``-o``, ``-r``.
    nranks
        Use the first ``nranks`` accelerators (default: all).
    algo, proto, channels
        Overrides, as ``NCCL_ALGO`` / ``NCCL_PROTO`` / ``NCCL_MAX_NCHANNELS`` pin them.
    family
        ``nccl`` (NCCL's algorithms, the default) or ``all`` (also direct and recursive).
    session
        The session to tune in (default a new one).
    selection
        ``nccl-model`` (the default: NCCL's own cost model picks, the pick is simulated) or
        ``fastest`` (every enabled candidate simulated, the least time wins; ties: first in
        candidate order); :attr:`~scaleup.tune.request.BenchRequest.selection`.

    Returns
    -------
    TunedChoice
        The choice, simulated.

    Examples
    --------
    >>> from scaleup.topology import resolve_topology
    >>> tune(resolve_topology("dgx-h100"), "all_reduce", 1 << 30).algorithm
    'nvls'
    """
    request = BenchRequest(
        op=collective,
        sizes_bytes=(nbytes,),
        dtype=dtype,
        redop=redop,
        root=root,
        ranks=nranks,
        algorithm=algo,
        protocol=proto,
        channels=channels,
        family=family,
    )
    if selection is not None:
        request = dataclasses.replace(request, selection=selection)
    return (session or TuneSession()).tune(topology, request)[0]
