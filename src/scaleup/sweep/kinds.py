"""The registry of sweep point kinds: spec files name a kind, they never name code.

A point's ``kind`` is looked up, by name only, among:

1. kinds registered in code with :func:`register_kind` (a test, a notebook, a script);
2. the built-ins: ``"bench"`` (one nccl-tests row, :func:`bench_point`) and ``"plan"`` (one
   planner result, :func:`plan_point`);
3. entry points a user installed on purpose, in the group :data:`ENTRY_POINT_GROUP`
   (``[project.entry-points."scaleup.sweep_kinds"] mykind = "mypkg.kinds:evaluate"``); an entry
   point is loaded only when a sweep uses its name, and it cannot shadow a built-in.

A kind function is ``f(point: dict) -> dict`` (built-ins also take the batch's ``session=``)
and raises on failure (the sweep records the error). Kind functions travel to Dask workers as
pickled references, so they must be importable there. Nothing here imports a module named by
a spec: ``kind = "os:system"`` is just an unknown name. Topologies are built once per process
(:func:`topology_of`).
"""

from __future__ import annotations

import functools
import importlib.metadata
import inspect
from collections.abc import Callable, Iterable, Mapping
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from scaleup.errors import UsageError
from scaleup.report import BenchRow
from scaleup.sweep.schema import TYPES, dataclass_columns
from scaleup.tune import BenchRequest, CollectiveTimer, TuneSession

if TYPE_CHECKING:
    from scaleup.topology import Topology

__all__ = [
    "BUILTIN_KINDS",
    "ENTRY_POINT_GROUP",
    "FAULT_SEPARATOR",
    "KindFunction",
    "bench_point",
    "declared_columns",
    "get_kind",
    "kind_names",
    "plan_point",
    "register_kind",
    "resolve_kinds",
    "topology_of",
    "unregister_kind",
]

#: What evaluates a point: its dict in, a dict of results out; raises on failure.
KindFunction = Callable[[dict[str, Any]], dict[str, Any]]
#: The entry-point group that installed packages add point kinds to.
ENTRY_POINT_GROUP = "scaleup.sweep_kinds"


#: Separator of the link faults in a point's ``fail_links``/``degrade`` field (one string each,
#: so a point stays flat data and a point without faults keeps its id).
FAULT_SEPARATOR = ";"


@functools.lru_cache(maxsize=64)
def topology_of(
    label: str,
    text: str | None = None,
    fail_links: str = "",
    degrade: str = "",
    profile_text: str | None = None,
) -> Topology:
    """The topology of a point, built once per process: ``text`` (an embedded file) or the
    preset spec ``label`` (``"ualink-pod:n=64"``, ``"2xdgx-h100"``), with the links of a block's
    ``fail_links``/``degrade`` (joined by ``;``) failed or degraded, and the calibration profile
    ``profile_text`` (an embedded ``scaleup calibrate`` file) applied when given."""
    from scaleup.calibrate.profile import apply_profile
    from scaleup.calibrate.profile import loads as load_profile_text
    from scaleup.topology import loads, resolve_topology
    from scaleup.topology.faults import apply_faults, parse_degrade, parse_fail_link

    topology = loads(text, source=label) if text is not None else resolve_topology(label)
    faults = [
        parse_fail_link(t, source="fail_links") for t in fail_links.split(FAULT_SEPARATOR) if t
    ]
    faults += [parse_degrade(t, source="degrade") for t in degrade.split(FAULT_SEPARATOR) if t]
    topology = apply_faults(topology, faults)
    if profile_text is None:
        return topology
    return apply_profile(topology, load_profile_text(profile_text, source=f"{label} profile"))


def _point_topology(point: dict[str, Any]) -> Topology:
    """:func:`topology_of` the point's fields."""
    return topology_of(
        point["topology"],
        point.get("topology_text"),
        point.get("fail_links", ""),
        point.get("degrade", ""),
        point.get("profile_text"),
    )


def bench_point(point: dict[str, Any], session: TuneSession | None = None) -> dict[str, Any]:
    """One nccl-tests row: ``topology, collective, bytes, dtype, nranks (0 = all), algo, proto``
    (``"tuned"`` lets the tuner choose) -> :meth:`scaleup.report.BenchRow.to_dict`; ``session``
    is the batch's tuning session."""
    from scaleup.bench import bench_rows

    topology = _point_topology(point)
    nranks = int(point.get("nranks", 0) or 0)
    algo = point.get("algo", "tuned")
    proto = point.get("proto", "tuned")
    request = BenchRequest(
        op=point["collective"],
        sizes_bytes=(int(point["bytes"]),),
        dtype=point.get("dtype", "float32"),
        ranks=nranks or None,
        algorithm=None if algo == "tuned" else algo,
        protocol=None if proto == "tuned" else proto,
    )
    rows = bench_rows(topology, request, session=session)
    row = rows[0].to_dict()
    # The spec's label ("2xdgx-h100", a file path) is what a reader grouped by; the built
    # topology's own name goes next to it.
    row["topology_name"] = row.pop("topology")
    return row


def plan_point(point: dict[str, Any], session: TuneSession | None = None) -> dict[str, Any]:
    """One planner result: ``topology, model`` and the planner's keywords (``tp, pp, dp, ep, zero,
    mbs, gbs, seq, ...``, ``overlap``, ``compute_efficiency``) -> ``PlanResult.to_dict()``
    (nested fields become dotted columns) plus ``memory_fraction`` (memory per device / HBM)."""
    from scaleup.workload.plan import plan

    topology = _point_topology(point)
    fields = ("kind", "topology", "topology_text", "model", "fail_links", "degrade")
    own = (*fields, "profile", "profile_text")
    kwargs = {k: v for k, v in point.items() if k not in own}
    accepted = inspect.signature(plan).parameters
    if not any(p.kind is inspect.Parameter.VAR_KEYWORD for p in accepted.values()):
        unknown = sorted(set(kwargs) - set(accepted))
        if unknown:
            raise UsageError(
                f"the planner takes no {', '.join(unknown)}", source="plan", entry=unknown[0]
            )
    data = plan(point["model"], topology, comm_time=CollectiveTimer(session), **kwargs).to_dict()
    data.pop("model_spec", None)  # the model's shape: the catalog's, the same on every row
    data["model_name"] = data.pop("model")
    data["topology_name"] = data.pop("topology")
    hbm = data.get("hbm_per_device_bytes") or 0
    data["memory_fraction"] = data["memory_per_device_bytes"] / hbm if hbm else None
    return data


#: The kinds every sweep knows.
BUILTIN_KINDS: Mapping[str, KindFunction] = MappingProxyType(
    {"bench": bench_point, "plan": plan_point}
)
#: Kinds registered in code (:func:`register_kind`); they take precedence over everything else.
_REGISTERED: dict[str, KindFunction] = {}
#: The result columns kind functions declare (``{name: type name}``), by function.
_DECLARED: dict[KindFunction, Mapping[str, str]] = {
    bench_point: MappingProxyType(dataclass_columns(BenchRow, rename={"topology": "topology_name"}))
}


def declared_columns(function: KindFunction) -> Mapping[str, str]:
    """The result columns ``function`` declares, ``{name: type name}`` (types of
    :data:`scaleup.sweep.schema.TYPES`): given to :func:`register_kind`, or a ``columns``
    attribute of the function (an entry point's); empty when it declares none (its columns are
    then typed by its first rows, see :mod:`scaleup.sweep.schema`)."""
    found = _DECLARED.get(function)
    if found is None:
        found = getattr(function, "columns", None)
    if not isinstance(found, Mapping) or any(t not in TYPES for t in found.values()):
        return {}
    return found


def register_kind(
    name: str,
    function: KindFunction,
    *,
    replace: bool = False,
    columns: Mapping[str, str] | None = None,
) -> None:
    """Make ``function`` the point kind ``name`` in this process (and the workers it sends to).

    ``replace=True`` lets it stand in for an existing kind (a built-in, a plugin or an earlier
    registration), e.g. a cheap fake of ``"bench"`` in a test; :func:`unregister_kind` undoes it.
    ``columns`` declares its result columns and their types (``{"y": "int64"}``, one of
    :data:`scaleup.sweep.schema.TYPES`), so every part file of a sweep has them from the start.

    >>> register_kind("doctest-square", lambda point: {"y": point["x"] ** 2})
    >>> get_kind("doctest-square")({"x": 3})
    {'y': 9}
    >>> unregister_kind("doctest-square")
    """
    if not isinstance(name, str) or not name.strip():
        raise UsageError(f"a kind name is a non-empty string, got {name!r}", source="kinds")
    if not callable(function):
        raise UsageError(f"kind {name!r} needs a function, got {function!r}", source="kinds")
    if not replace and name in kind_names():
        raise UsageError(
            f"kind {name!r} exists already; pass replace=True to stand in for it", source="kinds"
        )
    if columns is not None:
        bad = [t for t in columns.values() if t not in TYPES]
        if bad:
            raise UsageError(
                f"kind {name!r}: column type {bad[0]!r} is not one of {', '.join(TYPES)}",
                source="kinds",
            )
        _DECLARED[function] = MappingProxyType(dict(columns))
    _REGISTERED[name] = function


def unregister_kind(name: str) -> None:
    """Forget a kind registered with :func:`register_kind` (a built-in it replaced returns)."""
    _REGISTERED.pop(name, None)


@functools.lru_cache(maxsize=1)
def _plugins() -> Mapping[str, importlib.metadata.EntryPoint]:
    """Installed entry points of :data:`ENTRY_POINT_GROUP`, by name (read once per process)."""
    found = importlib.metadata.entry_points(group=ENTRY_POINT_GROUP)
    return MappingProxyType({ep.name: ep for ep in found if ep.name not in BUILTIN_KINDS})


def kind_names() -> list[str]:
    """Every kind a spec may name here: registered, built-in and installed, sorted."""
    return sorted({*_REGISTERED, *BUILTIN_KINDS, *_plugins()})


def get_kind(name: str) -> KindFunction:
    """The function of kind ``name``.

    Raises
    ------
    UsageError
        No kind of that name, or its plugin fails to load.
    """
    if not isinstance(name, str):
        raise UsageError(f"a point kind is a name, got {name!r}", source="kind")
    if name in _REGISTERED:
        return _REGISTERED[name]
    if name in BUILTIN_KINDS:
        return BUILTIN_KINDS[name]
    plugin = _plugins().get(name)
    if plugin is None:
        raise UsageError(
            f"unknown point kind {name!r} (one of {', '.join(kind_names())})", source="kind"
        )
    try:
        function = plugin.load()
    except Exception as error:  # noqa: BLE001 - whatever a plugin raises, the kind is unusable
        raise UsageError(
            f"kind {name!r} ({plugin.value}) failed to load: {type(error).__name__}: {error}",
            source="kind",
        ) from None
    if not callable(function):
        raise UsageError(f"kind {name!r} ({plugin.value}) is not a function", source="kind")
    return function


def resolve_kinds(
    names: Iterable[Any], kinds: Mapping[str, KindFunction] | None = None
) -> dict[str, KindFunction]:
    """The functions of ``names``: from ``kinds`` when given, else from the registry.

    Raises
    ------
    UsageError
        A name that is not a kind.
    """
    wanted: dict[str, None] = {}
    for name in names:
        if not isinstance(name, str):
            raise UsageError(f"a point kind is a name, got {name!r}", source="kind")
        wanted[name] = None
    if kinds is None:
        return {name: get_kind(name) for name in wanted}
    unknown = [name for name in wanted if name not in kinds]
    if unknown:
        raise UsageError(
            f"unknown point kind {unknown[0]!r} (one of {', '.join(sorted(kinds))})",
            source="kind",
        )
    return {name: kinds[name] for name in wanted}
