"""The algorithm library: a registry keyed by NCCL's algorithm names plus ours.

>>> from scaleup.collectives.spec import CollectiveSpec
>>> s = build_schedule("ring", CollectiveSpec("all_reduce", nranks=4, count=8))
>>> s.n_steps, s.n_ops
(6, 36)
>>> "nvls" in algorithms_for("all_reduce")
True

Every builder handles world size 1 (a local copy), count 0 (no ops), counts that do not divide
evenly (blocks of floor/ceil elements, the larger ones first, zero-length blocks allowed; see
:func:`scaleup.collectives.algorithms._common.split`). Common parameters:

``channels``  parallel rings/trees/lanes; the data is split over them, ``op.channel`` tags them.
``chunks``    pipelining depth: each lane's data is split into that many pieces that pipeline
              through the steps.

An (algorithm, collective) pair the algorithm cannot express, or a world size it cannot handle,
raises :class:`~scaleup.errors.UnsupportedCollective`; an unknown parameter raises
:class:`~scaleup.errors.UsageError` naming it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from scaleup.collectives.algorithms import (
    allpairs,
    direct,
    hierarchical,
    nvls,
    nvls_tree,
    recursive,
    ring,
    torus,
    tree,
)
from scaleup.collectives.algorithms._common import local_copy_schedule
from scaleup.collectives.algorithms._estimate import check_schedule_size
from scaleup.collectives.schedule import Schedule
from scaleup.collectives.spec import COLLECTIVES, CollectiveSpec
from scaleup.errors import UnsupportedCollective, UsageError

__all__ = [
    "ALGORITHMS", "Algorithm", "algorithms_for", "build_schedule", "prepare_params", "supports",
]  # fmt: skip

Builder = Callable[[CollectiveSpec, dict[str, Any]], Schedule]


def _no_check(spec: CollectiveSpec, params: dict[str, Any]) -> str | None:
    return None


@dataclass(frozen=True)
class Algorithm:
    """A named algorithm: its builders per collective, parameter defaults and checks.

    ``normalise(spec, params)`` validates and fills in parameters (raising UsageError);
    ``check(spec, params)`` returns why a world size is unsupported, or None.
    """

    name: str
    description: str
    builders: Mapping[str, Builder]
    params: Mapping[str, Any]
    normalise: Callable[[CollectiveSpec, dict[str, Any]], dict[str, Any]]
    check: Callable[[CollectiveSpec, dict[str, Any]], str | None] = field(default=_no_check)

    @property
    def collectives(self) -> tuple[str, ...]:
        return tuple(c for c in COLLECTIVES if c in self.builders)


ALGORITHMS: dict[str, Algorithm] = {}


def _register(algorithm: Algorithm) -> None:
    ALGORITHMS[algorithm.name] = algorithm


_register(
    Algorithm(
        "ring",
        "rings over rank orders: reduce-scatter + all-gather; pipelined chains",
        ring.BUILDERS,
        ring.PARAMS,
        ring.normalise,
    )
)
_register(
    Algorithm(
        "tree",
        "NCCL's double binary tree: reduce up, broadcast down, pipelined",
        tree.BUILDERS,
        tree.PARAMS,
        tree.normalise,
    )
)
_register(
    Algorithm(
        "recursive",
        "recursive halving-doubling (Rabenseifner), MPICH's non-power-of-two fold",
        recursive.BUILDERS,
        recursive.PARAMS,
        recursive.normalise,
    )
)
_register(
    Algorithm(
        "direct",
        "every rank loads from every peer (one-shot / two-shot), pairwise all_to_all",
        direct.BUILDERS,
        direct.PARAMS,
        direct.normalise,
    )
)
_register(
    Algorithm(
        "allpairs",
        "every peer at once: two-shot all_reduce as RCCL's MSCCL allreduce_pairs",
        allpairs.BUILDERS,
        allpairs.PARAMS,
        allpairs.normalise,
    )
)
_register(
    Algorithm(
        "nvls",
        "in-switch reduction and multicast (NVLink SHARP)",
        nvls.BUILDERS,
        nvls.PARAMS,
        nvls.normalise,
    )
)
_register(
    Algorithm(
        "hierarchical",
        "intra-node reduce-scatter, inter-node all-reduce, intra-node all-gather; RS / AG by node",
        hierarchical.BUILDERS,
        hierarchical.PARAMS,
        hierarchical.normalise,
        hierarchical.check,
    )
)
_register(
    Algorithm(
        "nvls_tree",
        "NCCL's NVLS_TREE: in-switch reduction per server, a tree across servers, multicast back",
        nvls_tree.BUILDERS,
        nvls_tree.PARAMS,
        nvls_tree.normalise,
        nvls_tree.check,
    )
)
_register(
    Algorithm(
        "torus",
        "a ring per torus dimension, lanes in rotated orders and both directions",
        torus.BUILDERS,
        torus.PARAMS,
        torus.normalise,
        torus.check,
    )
)


def _lookup(name: str) -> Algorithm:
    algorithm = ALGORITHMS.get(name)
    if algorithm is None:
        raise UsageError(
            f"unknown algorithm {name!r}; known: {', '.join(ALGORITHMS)}", source="algorithm"
        )
    return algorithm


def algorithms_for(collective: str) -> list[str]:
    """Names of the algorithms that implement ``collective`` (registry order)."""
    if collective not in COLLECTIVES:
        raise UsageError(
            f"unknown collective {collective!r}; known: {', '.join(COLLECTIVES)}", source="op"
        )
    return [name for name, a in ALGORITHMS.items() if collective in a.builders]


def _prepare(
    name: str, spec: CollectiveSpec, params: Mapping[str, Any]
) -> tuple[Algorithm, dict[str, Any]]:
    algorithm = _lookup(name)
    if spec.collective not in algorithm.builders:
        others = ", ".join(algorithms_for(spec.collective)) or "none"
        raise UnsupportedCollective(
            f"algorithm {name} does not implement {spec.collective}; "
            f"algorithms for {spec.collective}: {others}"
        )
    unknown = [p for p in params if p not in algorithm.params]
    if unknown:
        raise UsageError(
            f"unknown parameter {unknown[0]!r} for algorithm {name}; "
            f"known: {', '.join(algorithm.params)}",
            source=unknown[0],
        )
    merged = algorithm.normalise(spec, {**algorithm.params, **params})
    reason = algorithm.check(spec, merged)
    if reason is not None:
        raise UnsupportedCollective(f"algorithm {name} cannot run {spec.name}: {reason}")
    return algorithm, merged


def prepare_params(name: str, spec: CollectiveSpec, params: Mapping[str, Any]) -> dict[str, Any]:
    """The parameters ``build_schedule(name, spec, **params)`` would build with: defaults filled
    in and checked (what ``schedule.params`` records)."""
    return _prepare(name, spec, params)[1]


def build_schedule(name: str, spec: CollectiveSpec, **params: Any) -> Schedule:
    """Build the Schedule of algorithm ``name`` for ``spec``.

    Parameters
    ----------
    name
        A key of :data:`ALGORITHMS` (``ring``, ``tree``, ``recursive``, ``direct``, ``nvls``,
        ``hierarchical``, ``nvls_tree``, ``torus``).
    spec
        The collective, world size and element count.
    **params
        Algorithm parameters (``channels``, ``chunks`` and the algorithm's own; see each module).

    Returns
    -------
    Schedule
        Immutable; ``schedule.params`` records the parameters after defaults were filled in.

    Raises
    ------
    UnsupportedCollective
        The algorithm cannot express this collective or world size.
    UsageError
        Unknown algorithm, unknown parameter, or a bad parameter value.
    LimitError
        More channels or chunks than :mod:`scaleup.limits` allows, or a schedule estimated
        (before it is built) to be over ``MAX_SCHEDULE_OPS`` or this machine's free memory.
    """
    algorithm, merged = _prepare(name, spec, params)
    check_schedule_size(name, spec, merged)
    if spec.nranks == 1:
        return local_copy_schedule(spec, name, merged)
    return algorithm.builders[spec.collective](spec, merged)


def supports(name: str, collective: str, nranks: int, **params: Any) -> bool:
    """Whether ``build_schedule(name, CollectiveSpec(collective, nranks, ...))`` would succeed."""
    try:
        _prepare(name, CollectiveSpec(collective, nranks=nranks, count=nranks), params)
    except (UnsupportedCollective, UsageError):
        return False
    return True
