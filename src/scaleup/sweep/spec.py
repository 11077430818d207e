"""Sweep specs: a TOML file describing a cross product of points, parsed and validated.

A spec is a list of blocks; each block is the cross product of its axes, and the sweep is the
concatenation of every block's points, in file order (:func:`scaleup.sweep.expand.expand_spec`)::

    name = "fabrics"

    [[bench]]                      # collective points: one nccl-tests row each
    topologies  = ["dgx-h100", "ualink-pod:n=64", "topologies/two-h100.toml"]
    nodes       = [1, 2]           # presets only: 2 -> "2xdgx-h100"
    collectives = ["all_reduce", "all_gather"]
    sizes       = { min = "8", max = "1G", factor = 2 }     # or a list: ["1M", "64M"]
    algorithms  = ["tuned"]        # or NCCL names: ["ring", "tree"]
    protocols   = ["tuned"]        # or ["simple", "ll", "ll128"]
    ranks       = [0]              # 0 = every accelerator of the topology
    dtype       = "float32"
    profile     = "h100.toml"      # optional: a calibration profile (scaleup calibrate -o)
    fail_links  = ["g0-sw0"]       # optional, any block: as bench --fail-link, every topology
    degrade     = ["g1-sw0=0.5"]   # optional, any block: as bench --degrade, every topology

    [[plan]]                       # planner points: one PlanResult each
    models     = ["llama3-70b"]
    topologies = ["dgx-h100", "2xdgx-h100"]
    tp = [1, 2, 4, 8]              # every other key: a list is an axis, a scalar is fixed
    pp = [1, 2]

    [[grid]]                       # any registered point kind (scaleup.sweep.kinds)
    kind = "my-kind"               # a name, never code: see scaleup.sweep.kinds.register_kind
    params = { x = [1, 2, 3], y = "fixed" }

A spec is data all the way down: ``plan`` keywords and ``grid`` params are strings, finite
numbers and booleans, or lists of them (axes), and never the name of a row's own column
(:data:`~scaleup.sweep.points.LEAD_COLUMNS`); a kind is a registered name. Any other input is a
:class:`~scaleup.errors.SpecFileError` naming the file, the entry and the rule.
"""

from __future__ import annotations

import difflib
import math
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from scaleup.collectives.spec import PROTOCOL_NAMES
from scaleup.errors import SpecFileError
from scaleup.files import parse_toml, read_text, validate
from scaleup.sweep.kinds import FAULT_SEPARATOR, kind_names
from scaleup.sweep.points import LEAD_COLUMNS

__all__ = [
    "PROTOCOLS",
    "BenchBlock",
    "GridBlock",
    "PlanBlock",
    "SizeRange",
    "SweepSpec",
    "axis",
    "load_spec",
    "load_spec_text",
]

#: Protocol names as NCCL spells them, plus "tuned" (let the tuner choose).
PROTOCOLS = ("tuned", *PROTOCOL_NAMES)
#: Names a ``[[grid]]`` param may not take (the row's own columns).
_RESERVED = (*LEAD_COLUMNS, "point")
#: ... nor a ``[[plan]]`` keyword (the point's own fields).
_PLAN_RESERVED = (*_RESERVED, "topology", "topology_text", "model", "fail_links", "degrade")


def axis(value: Any) -> list[Any]:
    """The values of an axis: a list as is, a scalar as a list of one."""
    return list(value) if isinstance(value, (list, tuple)) else [value]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class SizeRange(_Strict):
    """``{min, max, factor}``: min, min*factor, ... up to max (inclusive); nccl-tests' -b/-e/-f."""

    min: int | str
    max: int | str
    factor: float = Field(2.0, gt=1.0, allow_inf_nan=False)


class _OnTopologies(BaseModel):
    """The fabric axes of a block: topologies (presets or files) × nodes (``Nx<preset>``)."""

    topologies: list[str] = Field(min_length=1)
    nodes: list[int] = Field(default_factory=lambda: [1], min_length=1)
    #: a calibration profile (``scaleup calibrate -o FILE``) applied to every topology of the
    #: block, relative to the spec like topology files
    profile: str | None = Field(default=None, min_length=1)
    #: ``A-B`` and ``A-B=F``, as ``bench --fail-link``/``--degrade``: applied to every topology
    fail_links: list[str] = Field(default_factory=list)
    degrade: list[str] = Field(default_factory=list)

    @field_validator("fail_links", "degrade")
    @classmethod
    def _faults(cls, value: list[str], info: Any) -> list[str]:
        from scaleup.errors import UsageError
        from scaleup.topology.faults import parse_degrade, parse_fail_link

        parse = parse_fail_link if info.field_name == "fail_links" else parse_degrade
        for text in value:
            if FAULT_SEPARATOR in text:
                raise ValueError(f"{text!r}: one link per entry")
            try:
                parse(text, source=info.field_name)
            except UsageError as error:
                raise ValueError(f"{text!r}: {error.message}") from None
        return value

    @field_validator("topologies")
    @classmethod
    def _topologies(cls, value: list[str]) -> list[str]:
        for name in value:
            if not name.strip() or any(ord(c) < 32 or ord(c) == 127 for c in name):
                raise ValueError(f"{name!r} is not a preset, Nx<preset> or .toml file name")
        return value

    @field_validator("nodes")
    @classmethod
    def _nodes(cls, value: list[int]) -> list[int]:
        if any(n < 1 for n in value):
            raise ValueError("nodes must be >= 1")
        return value


class BenchBlock(_OnTopologies):
    """Collective points: topology × nodes × collective × size × algorithm × protocol × ranks
    × dtype."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    collectives: list[str] = Field(min_length=1)
    sizes: list[int | str] | SizeRange
    algorithms: list[str] = Field(default_factory=lambda: ["tuned"], min_length=1)
    protocols: list[str] = Field(default_factory=lambda: ["tuned"], min_length=1)
    ranks: list[int] = Field(default_factory=lambda: [0], min_length=1)
    dtype: list[str] | str = "float32"

    @field_validator("ranks")
    @classmethod
    def _ranks(cls, value: list[int]) -> list[int]:
        if any(n < 0 for n in value):
            raise ValueError("ranks must be >= 0 (0 = every accelerator)")
        return value

    @field_validator("collectives")
    @classmethod
    def _collectives(cls, value: list[str]) -> list[str]:
        from scaleup.collectives.spec import COLLECTIVES

        for name in value:
            if name not in COLLECTIVES:
                raise ValueError(f"unknown collective {name!r}{_hint(name, COLLECTIVES)}")
        return value

    @field_validator("protocols")
    @classmethod
    def _protocols(cls, value: list[str]) -> list[str]:
        for name in value:
            if name not in PROTOCOLS:
                raise ValueError(f"unknown protocol {name!r}{_hint(name, PROTOCOLS)}")
        return value

    @field_validator("algorithms")
    @classmethod
    def _algorithms(cls, value: list[str]) -> list[str]:
        known = _known_algorithms()
        if known:
            for name in value:
                if name != "tuned" and name not in known:
                    raise ValueError(f"unknown algorithm {name!r}{_hint(name, known)}")
        return value

    @field_validator("sizes")
    @classmethod
    def _sizes(cls, value: list[int | str] | SizeRange) -> list[int | str] | SizeRange:
        if isinstance(value, list) and not value:
            raise ValueError("an empty list sweeps nothing")
        return value

    @field_validator("dtype")
    @classmethod
    def _dtype(cls, value: list[str] | str) -> list[str] | str:
        from scaleup.collectives.spec import DTYPES

        if not axis(value):
            raise ValueError("an empty list sweeps nothing")
        for name in axis(value):
            if name not in DTYPES:
                raise ValueError(f"unknown dtype {name!r}{_hint(name, list(DTYPES))}")
        return value


class PlanBlock(_OnTopologies):
    """Planner points: model × topology × nodes × every other axis (tp, pp, dp, batch ...)."""

    model_config = ConfigDict(extra="allow", frozen=True)

    models: list[str] = Field(min_length=1)


class GridBlock(_Strict):
    """Points of any registered kind: the cross product of ``params`` (lists are axes)."""

    kind: str = Field(min_length=1)
    params: dict[str, Any] = Field(default_factory=dict)


class SweepSpec(_Strict):
    """A whole spec file: a name and its blocks."""

    name: str = "sweep"
    description: str = ""
    bench: list[BenchBlock] = Field(default_factory=list)
    plan: list[PlanBlock] = Field(default_factory=list)
    grid: list[GridBlock] = Field(default_factory=list)


def _hint(name: str, known: Any) -> str:
    close = difflib.get_close_matches(name, list(known), n=3, cutoff=0.5)
    return f" (did you mean {', '.join(close)}?)" if close else f" (one of {', '.join(known)})"


def _known_algorithms() -> list[str]:
    try:
        from scaleup.collectives.algorithms import ALGORITHMS
    except ImportError:  # the algorithm registry is not written yet: names are checked per point
        return []
    return sorted(ALGORITHMS)


def load_spec_text(
    text: str, *, source: str = "<spec>", kinds: Iterable[str] | None = None
) -> SweepSpec:
    """Parse and validate spec TOML ``text``; errors name ``source``, the entry and the rule.

    ``kinds`` are the point-kind names a ``[[grid]]`` block may use (default: the registry's,
    :func:`scaleup.sweep.kinds.kind_names`).

    Raises
    ------
    SpecFileError
        Not TOML, an unknown key, a wrong type, an unknown collective/protocol/dtype/kind, a
        value that is not plain data, no blocks.
    """
    data = parse_toml(text, SpecFileError, source)
    spec = validate(SweepSpec, data, SpecFileError, source)
    if not (spec.bench or spec.plan or spec.grid):
        raise SpecFileError(
            "no [[bench]], [[plan]] or [[grid]] block: nothing to sweep", source=source
        )
    for p, plan in enumerate(spec.plan):
        for key, value in (plan.model_extra or {}).items():
            _check_axis(key, value, _PLAN_RESERVED, source, f"plan[{p}]")
    known = set(kind_names() if kinds is None else kinds)
    for g, grid in enumerate(spec.grid):
        if grid.kind not in known:
            raise SpecFileError(
                f"unknown point kind {grid.kind!r}{_hint(grid.kind, sorted(known))}; a kind is "
                "a registered name (scaleup.sweep.kinds), never a module",
                source=source,
                entry=f"grid[{g}].kind",
            )
        for key, value in grid.params.items():
            _check_axis(key, value, _RESERVED, source, f"grid[{g}].params")
    return spec


def _check_axis(key: str, value: Any, reserved: tuple[str, ...], source: str, block: str) -> None:
    """A plan keyword or grid param: a plain value, or a non-empty list of them (an axis)."""
    if not key or not key.isprintable():
        raise SpecFileError(f"{key!r} is not a column name", source=source, entry=block)
    entry = f"{block}.{key}"
    if key in reserved:
        raise SpecFileError(f"{key!r} is a column of every result row", source=source, entry=entry)
    if isinstance(value, list) and not value:
        raise SpecFileError("an empty list sweeps nothing", source=source, entry=entry)
    for i, item in enumerate(axis(value)):
        where = f"{entry}[{i}]" if isinstance(value, list) else entry
        if isinstance(item, float) and not math.isfinite(item):
            raise SpecFileError(f"{item} is not a finite number", source=source, entry=where)
        if isinstance(item, int) and not -(2**63) <= item < 2**63:
            raise SpecFileError("an integer must fit in 64 bits", source=source, entry=where)
        if not isinstance(item, (str, int, float)):  # bool is an int
            raise SpecFileError(
                f"a {type(item).__name__} is not a value here: use a string, a number, a "
                "boolean, or a list of them",
                source=source,
                entry=where,
            )


def load_spec(path: str | Path, *, kinds: Iterable[str] | None = None) -> tuple[SweepSpec, Path]:
    """Read and validate the spec file at ``path``; returns the spec and the file's directory
    (topology files in the spec are relative to it). ``kinds`` as in :func:`load_spec_text`."""
    path = Path(path)
    text = read_text(path, SpecFileError)
    return load_spec_text(text, source=str(path), kinds=kinds), path.resolve().parent
