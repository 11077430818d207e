"""Sweep specs: a TOML file describing a cross product of points, validated, expanded, hashed.

A spec is a list of blocks; each block is the cross product of its axes, and the sweep is the
concatenation of every block's points, in file order::

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

    [[plan]]                       # planner points: one PlanResult each
    models     = ["llama3-70b"]
    topologies = ["dgx-h100", "2xdgx-h100"]
    tp = [1, 2, 4, 8]              # every other key: a list is an axis, a scalar is fixed
    pp = [1, 2]

    [[grid]]                       # any registered point kind (see scaleup.sweep_eval.KINDS)
    kind = "my.module:evaluate"
    params = { x = [1, 2, 3], y = "fixed" }

A *point* is a small JSON-able dict (``{"kind": "bench", "topology": ..., ...}``): pure data,
picklable, evaluated anywhere by :func:`scaleup.sweep_eval.evaluate_point`. Its id is a hash of its
canonical JSON, so a resumed sweep recognises the points it already finished. A topology file is
embedded in the point (``topology_text``): the point does not depend on the worker's filesystem,
and editing the file changes the ids (those points are recomputed).
"""

from __future__ import annotations

import difflib
import hashlib
import itertools
import json
import math
import tomllib
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from scaleup.collectives.spec import PROTOCOL_NAMES
from scaleup.errors import ScaleupError, SpecFileError
from scaleup.units import parse_size

__all__ = [
    "PROTOCOLS",
    "SweepSpec",
    "expand_spec",
    "load_spec",
    "load_spec_text",
    "point_id",
    "size_range",
]

#: Protocol names as NCCL spells them, plus "tuned" (let the tuner choose).
PROTOCOLS = ("tuned", *PROTOCOL_NAMES)
#: Keys of a point that are not copied into result columns (bulky, or the id itself).
HIDDEN_POINT_KEYS = ("topology_text",)


def _listify(value: Any) -> list[Any]:
    return list(value) if isinstance(value, (list, tuple)) else [value]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class SizeRange(_Strict):
    """``{min, max, factor}``: min, min*factor, ... up to max (inclusive); nccl-tests' -b/-e/-f."""

    min: int | str
    max: int | str
    factor: float = Field(2.0, gt=1.0)


class BenchBlock(_Strict):
    """Collective points: topology × nodes × collective × size × algorithm × protocol × ranks
    × dtype."""

    topologies: list[str] = Field(min_length=1)
    nodes: list[int] = Field(default_factory=lambda: [1], min_length=1)
    collectives: list[str] = Field(min_length=1)
    sizes: list[int | str] | SizeRange
    algorithms: list[str] = Field(default_factory=lambda: ["tuned"], min_length=1)
    protocols: list[str] = Field(default_factory=lambda: ["tuned"], min_length=1)
    ranks: list[int] = Field(default_factory=lambda: [0], min_length=1)
    dtype: list[str] | str = "float32"

    @field_validator("nodes")
    @classmethod
    def _nodes(cls, value: list[int]) -> list[int]:
        if any(n < 1 for n in value):
            raise ValueError("nodes must be >= 1")
        return value

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

    @field_validator("dtype")
    @classmethod
    def _dtype(cls, value: list[str] | str) -> list[str] | str:
        from scaleup.collectives.spec import DTYPES

        for name in _listify(value):
            if name not in DTYPES:
                raise ValueError(f"unknown dtype {name!r}{_hint(name, list(DTYPES))}")
        return value


class PlanBlock(BaseModel):
    """Planner points: model × topology × nodes × every other axis (tp, pp, dp, batch ...)."""

    model_config = ConfigDict(extra="allow", frozen=True)

    models: list[str] = Field(min_length=1)
    topologies: list[str] = Field(min_length=1)
    nodes: list[int] = Field(default_factory=lambda: [1], min_length=1)


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


def _entry(loc: tuple[Any, ...]) -> str:
    """Pydantic's error location ``('bench', 0, 'sizes')`` -> ``bench[0].sizes``."""
    text = ""
    for part in loc:
        if isinstance(part, int):
            text += f"[{part}]"
        elif "[" in part or part[:1].isupper() or part in ("str", "int", "float", "bool"):
            continue  # union branch names (list[...], SizeRange) say nothing to a user
        else:
            text += f".{part}" if text else str(part)
    return text


def load_spec_text(text: str, *, source: str = "<spec>") -> SweepSpec:
    """Parse and validate spec TOML ``text``; errors name ``source``, the entry and the rule.

    Raises
    ------
    SpecFileError
        Not TOML, an unknown key, a wrong type, an unknown collective/protocol/dtype, no blocks.
    """
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        raise SpecFileError(f"not valid TOML: {error}", source=source) from None
    try:
        spec = SweepSpec.model_validate(data)
    except ValidationError as error:
        # In a union (sizes: list | range) the deepest location is the branch the user meant.
        first = max(error.errors(), key=lambda e: len(e["loc"]))
        message = str(first["msg"]).removeprefix("Value error, ")
        raise SpecFileError(message, source=source, entry=_entry(first["loc"]) or None) from None
    if not (spec.bench or spec.plan or spec.grid):
        raise SpecFileError(
            "no [[bench]], [[plan]] or [[grid]] block: nothing to sweep", source=source
        )
    return spec


def load_spec(path: str | Path) -> tuple[SweepSpec, Path]:
    """Read and validate the spec file at ``path``; returns the spec and the file's directory
    (topology files in the spec are relative to it)."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as error:
        raise SpecFileError(f"cannot read: {error.strerror or error}", source=str(path)) from None
    return load_spec_text(text, source=str(path)), path.resolve().parent


def size_range(min_bytes: int, max_bytes: int, factor: float) -> list[int]:
    """Sizes min, min*factor, ... <= max, rounded to whole bytes, without repeats.

    >>> size_range(8, 64, 2)
    [8, 16, 32, 64]
    >>> size_range(1, 8, 1.5)
    [1, 2, 3, 5, 8]
    """
    sizes: list[int] = []
    value = float(max(min_bytes, 1))
    while round(value) <= max_bytes:
        size = round(value)
        if not sizes or size != sizes[-1]:
            sizes.append(size)
        value *= factor
    if min_bytes == 0:
        sizes.insert(0, 0)
    return sizes


def _sizes(block: BenchBlock, source: str, entry: str) -> list[int]:
    try:
        if isinstance(block.sizes, SizeRange):
            lo = parse_size(block.sizes.min, source=source)
            hi = parse_size(block.sizes.max, source=source)
            if hi < lo:
                raise SpecFileError(f"max ({hi}) < min ({lo})", source=source, entry=entry)
            return size_range(lo, hi, block.sizes.factor)
        return [parse_size(s, source=source) for s in block.sizes]
    except SpecFileError:
        raise
    except ScaleupError as error:
        raise SpecFileError(error.message, source=source, entry=entry) from None


def _topologies(
    names: list[str], nodes: list[int], base: Path, source: str, entry: str
) -> list[dict[str, str]]:
    """Each topology entry as point fields: ``{"topology": label}`` (+ ``topology_text``, files)."""
    out: list[dict[str, str]] = []
    for i, name in enumerate(names):
        if name.endswith(".toml"):
            path = Path(name) if Path(name).is_absolute() else base / name
            try:
                text = path.read_text(encoding="utf-8")
            except OSError as error:
                raise SpecFileError(
                    f"topology file {name!r}: {error.strerror or error}",
                    source=source,
                    entry=f"{entry}[{i}]",
                ) from None
            out.append({"topology": name, "topology_text": text})
            continue
        for n in nodes:
            out.append({"topology": name if n == 1 else f"{n}x{name}"})
    return out


def _check_topologies(points_topos: list[dict[str, str]], source: str, entry: str) -> None:
    """Build each topology once now, so a typo is a spec error (exit 2), not N failed points."""
    from scaleup.sweep_eval import topology_of

    for fields in points_topos:
        try:
            topology_of(fields["topology"], fields.get("topology_text"))
        except ScaleupError as error:
            raise SpecFileError(
                f"topology {fields['topology']!r}: {error.one_line()}", source=source, entry=entry
            ) from None


def _cross(axes: dict[str, list[Any]]) -> list[dict[str, Any]]:
    keys = list(axes)
    return [dict(zip(keys, combo, strict=True)) for combo in itertools.product(*axes.values())]


def expand_spec(
    spec: SweepSpec,
    *,
    base: str | Path = ".",
    source: str = "<spec>",
    check_topologies: bool = True,
) -> list[dict[str, Any]]:
    """Every point of ``spec`` in a stable order (blocks in file order, axes as written).

    Parameters
    ----------
    spec
        A validated spec (:func:`load_spec`).
    base
        Directory that relative topology-file paths are read from.
    source
        The spec's name in error messages.
    check_topologies
        Build each topology once here so an unknown preset fails the whole spec early.

    Returns
    -------
    list of dict
        Points: JSON-able dicts with a ``kind`` key; :func:`point_id` names each.
    """
    base = Path(base)
    points: list[dict[str, Any]] = []
    for b, block in enumerate(spec.bench):
        entry = f"bench[{b}]"
        topos = _topologies(block.topologies, block.nodes, base, source, f"{entry}.topologies")
        if check_topologies:
            _check_topologies(topos, source, f"{entry}.topologies")
        sizes = _sizes(block, source, f"{entry}.sizes")
        for topo, collective, dtype, nranks, algo, proto, nbytes in itertools.product(
            topos,
            block.collectives,
            _listify(block.dtype),
            block.ranks,
            block.algorithms,
            block.protocols,
            sizes,
        ):
            points.append(
                {
                    "kind": "bench",
                    **topo,
                    "collective": collective,
                    "bytes": nbytes,
                    "dtype": dtype,
                    "nranks": nranks,
                    "algo": algo,
                    "proto": proto,
                }
            )
    for p, plan in enumerate(spec.plan):
        entry = f"plan[{p}]"
        topos = _topologies(plan.topologies, plan.nodes, base, source, f"{entry}.topologies")
        if check_topologies:
            _check_topologies(topos, source, f"{entry}.topologies")
        extra = {k: _listify(v) for k, v in (plan.model_extra or {}).items()}
        for topo, model in itertools.product(topos, plan.models):
            for combo in _cross(extra):
                points.append({"kind": "plan", **topo, "model": model, **combo})
    for grid in spec.grid:
        for combo in _cross({k: _listify(v) for k, v in grid.params.items()}):
            points.append({"kind": grid.kind, **combo})
    return points


def canonical(point: dict[str, Any]) -> str:
    """The canonical JSON of a point (sorted keys, no spaces): what its id hashes."""
    return json.dumps(point, sort_keys=True, separators=(",", ":"), default=_json_default)


def _json_default(value: Any) -> Any:
    if hasattr(value, "item"):
        return value.item()
    raise TypeError(f"point values must be JSON data, got {type(value).__name__}")


def point_id(point: dict[str, Any]) -> str:
    """A stable 16-hex-digit id: the SHA-256 of the point's canonical JSON.

    >>> point_id({"kind": "bench", "bytes": 8}) == point_id({"bytes": 8, "kind": "bench"})
    True
    """
    if any(isinstance(v, float) and not math.isfinite(v) for v in point.values()):
        raise ValueError("point values must be finite")
    return hashlib.sha256(canonical(point).encode()).hexdigest()[:16]
