"""Expanding a validated spec into its points, in a stable order, at most :data:`MAX_POINTS`.

Each block is the cross product of its axes, and the sweep is every block's points in file
order. Topologies are built once here, so a mistyped preset fails the whole spec (exit 2) and
not a thousand points; a topology *file* is embedded in its points (``topology_text``), so the
points do not depend on a worker's filesystem and editing the file changes their ids. The
number of points is known before any is built, so an oversized spec is refused at once.
"""

from __future__ import annotations

import itertools
import math
from pathlib import Path
from typing import Any

from scaleup.errors import ScaleupError, SpecFileError
from scaleup.sweep.kinds import FAULT_SEPARATOR, topology_of
from scaleup.sweep.spec import BenchBlock, PlanBlock, SizeRange, SweepSpec, axis
from scaleup.units import format_bytes, parse_size

__all__ = ["MAX_POINTS", "MAX_SIZE_BYTES", "expand_spec", "size_range"]

#: Most points one spec expands to: hours of simulation, and a few seconds and ~100 MB just to
#: expand and hash them before the first one runs. Split bigger studies into several specs.
MAX_POINTS = 250_000
#: Largest message size a spec may name: 1 PiB, a thousand times any accelerator's memory.
MAX_SIZE_BYTES = 1 << 50


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


def _size(text: int | str, source: str, entry: str) -> int:
    try:
        nbytes = parse_size(text, source=source)
    except ScaleupError as error:
        raise SpecFileError(error.message, source=source, entry=entry) from None
    if nbytes > MAX_SIZE_BYTES:
        raise SpecFileError(
            f"{text!r} is over the largest size, {format_bytes(MAX_SIZE_BYTES)}",
            source=source,
            entry=entry,
        )
    return nbytes


def _sizes(block: BenchBlock, source: str, entry: str) -> list[int]:
    if not isinstance(block.sizes, SizeRange):
        return [_size(s, source, entry) for s in block.sizes]
    lo = _size(block.sizes.min, source, entry)
    hi = _size(block.sizes.max, source, entry)
    if hi < lo:
        raise SpecFileError(f"max ({hi}) < min ({lo})", source=source, entry=entry)
    steps = math.log(max(hi, 1) / max(lo, 1)) / math.log(block.sizes.factor)
    _check_count(math.floor(steps) + 2, 0, source, entry)
    return size_range(lo, hi, block.sizes.factor)


def _check_count(count: int, before: int, source: str, entry: str) -> None:
    """Refuse a spec of more than :data:`MAX_POINTS` points before building them."""
    if before + count > MAX_POINTS:
        raise SpecFileError(
            f"{before + count:,} points or more; a spec holds at most {MAX_POINTS:,} (split it)",
            source=source,
            entry=entry,
        )


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
            except (OSError, UnicodeDecodeError) as error:
                why = error.reason if isinstance(error, UnicodeDecodeError) else error.strerror
                raise SpecFileError(
                    f"topology file {name!r}: {why or error}",
                    source=source,
                    entry=f"{entry}[{i}]",
                ) from None
            out.append({"topology": name, "topology_text": text})
            continue
        for n in nodes:
            out.append({"topology": name if n == 1 else f"{n}x{name}"})
    return out


def _profile_fields(profile: str | None, base: Path, source: str, entry: str) -> dict[str, str]:
    """A block's calibration profile as point fields (``profile`` and the file's text,
    checked now so that a bad profile is a spec error); none without one."""
    if profile is None:
        return {}
    from scaleup.calibrate.profile import loads as load_profile_text

    path = Path(profile) if Path(profile).is_absolute() else base / profile
    try:
        text = path.read_text(encoding="utf-8")
        load_profile_text(text, source=profile)
    except (OSError, UnicodeDecodeError) as error:
        why = error.reason if isinstance(error, UnicodeDecodeError) else error.strerror
        raise SpecFileError(
            f"profile {profile!r}: {why or error}", source=source, entry=entry
        ) from None
    except ScaleupError as error:
        raise SpecFileError(error.one_line(), source=source, entry=entry) from None
    return {"profile": profile, "profile_text": text}


def _check_topologies(points_topos: list[dict[str, str]], source: str, entry: str) -> None:
    """Build each topology once now, so a typo is a spec error (exit 2), not N failed points."""
    for fields in points_topos:
        try:
            topology_of(
                fields["topology"],
                fields.get("topology_text"),
                fields.get("fail_links", ""),
                fields.get("degrade", ""),
            )
        except ScaleupError as error:
            raise SpecFileError(
                f"topology {fields['topology']!r}: {error.one_line()}", source=source, entry=entry
            ) from None
        except (ValueError, TypeError, OverflowError) as error:  # a builder's own input check
            raise SpecFileError(
                f"topology {fields['topology']!r}: {error}", source=source, entry=entry
            ) from error


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
        points += _bench_points(block, f"bench[{b}]", len(points), base, source, check_topologies)
    for p, plan in enumerate(spec.plan):
        points += _plan_points(plan, f"plan[{p}]", len(points), base, source, check_topologies)
    for g, grid in enumerate(spec.grid):
        params = {k: axis(v) for k, v in grid.params.items()}
        _check_count(math.prod(map(len, params.values())), len(points), source, f"grid[{g}]")
        points += [{"kind": grid.kind, **combo} for combo in _cross(params)]
    return points


def _block_topologies(
    block: BenchBlock | PlanBlock, base: Path, source: str, entry: str, check: bool
) -> list[dict[str, str]]:
    """A block's topologies as point fields (with its profile's, and its ``fail_links``/
    ``degrade`` joined by ``;`` when given), each built once first when ``check`` is set."""
    topos = _topologies(block.topologies, block.nodes, base, source, f"{entry}.topologies")
    faults = {
        key: FAULT_SEPARATOR.join(values)
        for key, values in (("fail_links", block.fail_links), ("degrade", block.degrade))
        if values
    }
    topos = [{**topo, **faults} for topo in topos]
    if check:
        _check_topologies(topos, source, f"{entry}.topologies")
    profile = _profile_fields(block.profile, base, source, f"{entry}.profile")
    return [{**topo, **profile} for topo in topos]


def _bench_points(
    block: BenchBlock, entry: str, before: int, base: Path, source: str, check: bool
) -> list[dict[str, Any]]:
    """A ``[[bench]]`` block's points: the cross product of its axes, counted before built."""
    topos = _block_topologies(block, base, source, entry, check)
    sizes = _sizes(block, source, f"{entry}.sizes")
    lengths = (len(block.collectives), len(axis(block.dtype)), len(block.ranks))
    count = len(topos) * len(sizes) * len(block.algorithms) * len(block.protocols)
    count *= math.prod(lengths)
    _check_count(count, before, source, entry)
    return [
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
        for topo, collective, dtype, nranks, algo, proto, nbytes in itertools.product(
            topos,
            block.collectives,
            axis(block.dtype),
            block.ranks,
            block.algorithms,
            block.protocols,
            sizes,
        )
    ]


def _plan_points(
    plan: PlanBlock, entry: str, before: int, base: Path, source: str, check: bool
) -> list[dict[str, Any]]:
    """A ``[[plan]]`` block's points: topologies x models x its extra axes."""
    topos = _block_topologies(plan, base, source, entry, check)
    extra = {k: axis(v) for k, v in (plan.model_extra or {}).items()}
    count = len(topos) * len(plan.models) * math.prod(map(len, extra.values()))
    _check_count(count, before, source, entry)
    return [
        {"kind": "plan", **topo, "model": model, **combo}
        for topo, model in itertools.product(topos, plan.models)
        for combo in _cross(extra)
    ]
