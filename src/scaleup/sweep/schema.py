"""The one Arrow schema every part file of a sweep is written with, so that any prefix of a
sweep (partial, resumed, full of errors) is a valid Parquet dataset.

The schema is fixed before any point runs (:func:`sweep_schema`): the lead columns have fixed
types (``error`` and ``error_type`` are always strings, ``elapsed_s`` float64), each point field
gets the type of its values across *every* point of the spec, and each kind adds the result
columns it declares (:func:`scaleup.sweep.kinds.declared_columns`; ``bench`` declares
:class:`~scaleup.report.BenchRow`'s). Every column is nullable, so an error row is nulls there.

A kind that declares nothing (``plan``, most user kinds) has its columns typed by the first rows
that carry them; a later row that needs a new column or a wider type (int -> float64 -> ...
string) widens the schema (:func:`widen`), and the store rewrites the older parts to it, widest
first, so a reader never meets a type it cannot cast to the first part's. Types are a closed
set: :data:`TYPES`.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import pyarrow as pa

from scaleup.sweep.points import HIDDEN_POINT_KEYS, LEAD_COLUMNS

__all__ = [
    "LEAD_TYPES",
    "TYPES",
    "conform",
    "dataclass_columns",
    "merge_types",
    "schema_from_json",
    "schema_to_json",
    "sweep_schema",
    "value_type",
    "widen",
]

#: Every type a sweep column may have, by the name the marker file stores.
TYPES: Mapping[str, pa.DataType] = {
    "null": pa.null(),
    "bool": pa.bool_(),
    "int64": pa.int64(),
    "double": pa.float64(),
    "string": pa.string(),
}
_NAMES = {str(t): n for n, t in TYPES.items()}
#: The lead columns' types, whatever the kind and whether the point failed.
LEAD_TYPES: Mapping[str, pa.DataType] = dict(
    zip(LEAD_COLUMNS, [pa.string()] * 5 + [pa.float64()], strict=True)
)
_PY_TYPES: Mapping[type, pa.DataType] = {
    bool: pa.bool_(),
    int: pa.int64(),
    float: pa.float64(),
    str: pa.string(),
}


def value_type(value: Any) -> pa.DataType:
    """The column type of one Python value (None: null; an int past 64 bits: string).

    >>> value_type(3), value_type(2.5), value_type(None), value_type(True)
    (DataType(int64), DataType(double), DataType(null), DataType(bool))
    """
    if value is None:
        return pa.null()
    if isinstance(value, int) and not isinstance(value, bool) and not -(2**63) <= value < 2**63:
        return pa.string()
    return _PY_TYPES.get(type(value), pa.string())


def merge_types(a: pa.DataType, b: pa.DataType) -> pa.DataType:
    """The narrowest type both fit in: null gives way, ints widen to float64, else string.

    >>> merge_types(pa.int64(), pa.float64()), merge_types(pa.bool_(), pa.int64())
    (DataType(double), DataType(string))
    """
    a, b = _known(a), _known(b)
    if a == b or pa.types.is_null(b):
        return a
    if pa.types.is_null(a):
        return b
    if {a, b} == {pa.int64(), pa.float64()}:
        return pa.float64()
    return pa.string()


def _known(t: pa.DataType) -> pa.DataType:
    """``t`` as one of :data:`TYPES` (other ints as int64, floats as float64, else string)."""
    if str(t) in _NAMES:
        return t
    if pa.types.is_integer(t):
        return pa.int64()
    if pa.types.is_floating(t):
        return pa.float64()
    return pa.string()


def widen(schema: pa.Schema, other: pa.Schema) -> pa.Schema:
    """``schema`` with ``other``'s columns merged in (new ones at the end, types widened)."""
    fields = {f.name: f.type for f in schema}
    for f in other:
        fields[f.name] = merge_types(fields.get(f.name, pa.null()), f.type)
    return pa.schema([pa.field(n, t, nullable=True) for n, t in fields.items()])


def conform(table: pa.Table, schema: pa.Schema) -> pa.Table:
    """``table`` with exactly ``schema``'s columns, in order: missing ones null, others cast.

    ``schema`` must already hold ``table``'s columns at types they cast to (:func:`widen`).
    """
    arrays = []
    for f in schema:
        if f.name not in table.column_names:
            arrays.append(pa.nulls(table.num_rows, f.type))
            continue
        column = table.column(f.name)
        if column.type == f.type:
            arrays.append(column)
        elif pa.types.is_string(f.type) and not pa.types.is_null(column.type):
            values = column.to_pylist()
            arrays.append(pa.array([None if v is None else str(v) for v in values], pa.string()))
        else:  # null to anything, int64 to float64 (past 2**53 rounded, as float64 does)
            arrays.append(column.cast(f.type, safe=False))
    return pa.Table.from_arrays(arrays, schema=schema)


def schema_to_json(schema: pa.Schema) -> list[list[str]]:
    """``[[name, type], ...]`` for the marker file (types by their :data:`TYPES` name)."""
    return [[f.name, _NAMES[str(_known(f.type))]] for f in schema]


def schema_from_json(data: Any) -> pa.Schema | None:
    """The schema :func:`schema_to_json` wrote, or None for anything else (an older marker)."""
    try:
        return pa.schema([pa.field(str(n), TYPES[t], nullable=True) for n, t in data])
    except (TypeError, ValueError, KeyError):
        return None


def dataclass_columns(cls: type, *, rename: Mapping[str, str] | None = None) -> dict[str, str]:
    """A dataclass's fields as declared columns (``{name: type name}``); ``X | None`` is X,
    anything but bool, int, float and str a string (the row holds its text)."""
    rename = rename or {}
    hints = typing.get_type_hints(cls)
    out: dict[str, str] = {}
    for f in dataclasses.fields(cls):
        hint = hints[f.name]
        if isinstance(hint, types.UnionType) or typing.get_origin(hint) is typing.Union:
            hint = next((a for a in typing.get_args(hint) if a is not type(None)), str)
        out[rename.get(f.name, f.name)] = _NAMES[str(_PY_TYPES.get(hint, pa.string()))]
    return out


def sweep_schema(
    points: Sequence[Mapping[str, Any]], declared: Mapping[str, Mapping[str, str]]
) -> pa.Schema:
    """The schema of a sweep's rows, before any point runs.

    Parameters
    ----------
    points
        Every point of the sweep (their fields become columns, typed by all their values).
    declared
        Kind name -> the result columns it declares (``{name: type name}``, :data:`TYPES`).

    A point field that its kind also returns is kept as ``requested_<name>`` on rows that
    succeeded (:func:`scaleup.sweep.evaluate.evaluate_point`), so both columns are there.
    """
    fields: dict[str, pa.DataType] = dict(LEAD_TYPES)
    results: dict[str, pa.DataType] = {}
    for kind in dict.fromkeys(p.get("kind") for p in points):
        for name, type_name in declared.get(kind, {}).items() if isinstance(kind, str) else ():
            results[name] = merge_types(results.get(name, pa.null()), TYPES[type_name])
    for name, t in _point_types(points).items():
        if name in results:
            fields[f"requested_{name}"] = t
            results[name] = merge_types(results[name], t)
        elif name not in fields:
            fields[name] = t
    fields.update(results)
    fields["point"] = pa.string()
    return pa.schema([pa.field(n, t, nullable=True) for n, t in fields.items()])


def _point_types(points: Iterable[Mapping[str, Any]]) -> dict[str, pa.DataType]:
    """Each visible point field's type, merged over every point (each Python type once: a
    million-point spec takes a fraction of a second)."""
    seen: dict[str, dict[type, Any]] = {}
    for point in points:
        for key, value in point.items():
            t = type(value)
            if t is int and not -(2**63) <= value < 2**63:
                t = _BigInt
            seen.setdefault(key, {}).setdefault(t, value)
    found: dict[str, pa.DataType] = {}
    for key, samples in seen.items():
        if key != "kind" and key not in HIDDEN_POINT_KEYS:
            found[key] = pa.null()
            for sample in samples.values():
                found[key] = merge_types(found[key], value_type(sample))
    return found


class _BigInt:
    """Marks an int past 64 bits among a field's types (stored as text)."""
