"""Result rows as Arrow tables: rows with differing keys into one table, tables with differing
columns into one, and the last row of each point kept.

Columns of different parts are unified: mixed ints and floats become floats, any other clash
becomes strings. Used by :mod:`scaleup.sweep.store`, which writes and reads them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pyarrow as pa

from scaleup.sweep.schema import merge_types, value_type

__all__ = ["dedupe_last", "table_from_rows", "unify_tables"]


def table_from_rows(rows: Sequence[dict[str, Any]]) -> pa.Table:
    """Rows with possibly different keys -> one table (missing values null; each column typed
    as :mod:`scaleup.sweep.schema` merges its values' types: ints among floats are float64,
    any other mix is strings)."""
    columns: dict[str, None] = {}
    for row in rows:
        columns.update(dict.fromkeys(row))
    arrays = []
    for name in columns:
        values = [row.get(name) for row in rows]
        dtype = pa.null()
        for value in values:
            dtype = merge_types(dtype, value_type(value))
        if pa.types.is_string(dtype):
            values = [None if v is None else str(v) for v in values]
        elif pa.types.is_floating(dtype):  # ints past 2**53 round, as float64 does
            values = [None if v is None else float(v) for v in values]
        arrays.append(pa.array(values, dtype))
    return pa.Table.from_arrays(arrays, names=list(columns))


def unify_tables(tables: list[pa.Table]) -> pa.Table:
    """Concatenate tables whose columns differ in presence or type."""
    if not tables:
        return pa.table({})
    types: dict[str, list[pa.DataType]] = {}
    for table in tables:
        for field in table.schema:
            types.setdefault(field.name, []).append(field.type)
    target: dict[str, pa.DataType] = {}
    for name, seen in types.items():
        kinds = {t for t in seen if not pa.types.is_null(t)}
        if not kinds:
            target[name] = pa.null()
        elif len(kinds) == 1:
            target[name] = kinds.pop()
        elif all(pa.types.is_integer(t) for t in kinds):
            target[name] = pa.int64()
        elif all(pa.types.is_integer(t) or pa.types.is_floating(t) for t in kinds):
            target[name] = pa.float64()
        else:
            target[name] = pa.string()
    fixed = []
    for table in tables:
        arrays = []
        for name, dtype in target.items():
            if name in table.column_names:
                column = table.column(name)
                arrays.append(column if column.type == dtype else column.cast(dtype))
            else:
                arrays.append(pa.nulls(table.num_rows, dtype))
        fixed.append(pa.Table.from_arrays(arrays, names=list(target)))
    return pa.concat_tables(fixed)


def dedupe_last(table: pa.Table) -> pa.Table:
    """Keep the last row of each ``point_id`` (a retried point replaces its old row)."""
    if "point_id" not in table.column_names or table.num_rows == 0:
        return table
    last: dict[str, int] = {}
    for i, pid in enumerate(table.column("point_id").to_pylist()):
        last[pid] = i
    if len(last) == table.num_rows:
        return table
    return table.take(sorted(last.values()))
