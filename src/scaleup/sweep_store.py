"""Sweep results on disk, appended as points finish, so an interrupted sweep loses nothing.

Two formats, chosen by the output's suffix:

- ``results.parquet``: a *Parquet dataset*, i.e. a directory of part files
  (``part-000000.parquet``, ...). Each flush writes one new part file to a temporary name and
  renames it into place, so a killed process leaves either the whole part or nothing. Any
  Parquet reader takes the directory (``pyarrow.parquet.read_table("results.parquet")``).
  A finished sweep compacts its parts into one.
- ``results.csv``: one CSV file, appended row by row (rewritten, atomically, only when a new
  column appears).

Rows are flat dicts; the same ``point_id`` written twice (a resumed retry) keeps the last row.
Columns of different parts are unified on read: mixed ints and floats become floats, any other
clash becomes strings.
"""

from __future__ import annotations

import csv
import os
import shutil
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.csv as pa_csv
import pyarrow.parquet as pq

from scaleup.errors import UsageError

__all__ = ["ResultStore", "read_results", "read_rows", "table_from_rows"]

_PART = "part-{:06d}.parquet"


def table_from_rows(rows: Sequence[dict[str, Any]]) -> pa.Table:
    """Rows with possibly different keys -> one table (missing values null; a column whose
    values do not share a type is stored as strings)."""
    columns: dict[str, None] = {}
    for row in rows:
        columns.update(dict.fromkeys(row))
    arrays = []
    for name in columns:
        values = [row.get(name) for row in rows]
        try:
            arrays.append(pa.array(values))
        except (pa.ArrowInvalid, pa.ArrowTypeError):
            arrays.append(pa.array([None if v is None else str(v) for v in values], pa.string()))
    return pa.Table.from_arrays(arrays, names=list(columns))


def _unify(tables: list[pa.Table]) -> pa.Table:
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


def _dedupe(table: pa.Table) -> pa.Table:
    """Keep the last row of each ``point_id`` (a retried point replaces its old row)."""
    if "point_id" not in table.column_names or table.num_rows == 0:
        return table
    last: dict[str, int] = {}
    for i, pid in enumerate(table.column("point_id").to_pylist()):
        last[pid] = i
    if len(last) == table.num_rows:
        return table
    return table.take(sorted(last.values()))


def _parts(directory: Path) -> list[Path]:
    return sorted(p for p in directory.glob("part-*.parquet") if p.is_file())


def read_results(path: str | Path) -> pa.Table:
    """All finished rows at ``path`` (a Parquet dataset directory, a Parquet file or a CSV).

    Raises
    ------
    UsageError
        ``path`` does not exist or is not a results file.
    """
    path = Path(path)
    if path.is_dir():
        return _dedupe(_unify([pq.read_table(p) for p in _parts(path)]))
    if not path.is_file():
        raise UsageError("no such results file or directory", source=str(path))
    try:
        if path.suffix == ".csv":
            if path.stat().st_size == 0:
                return pa.table({})
            options = pa_csv.ConvertOptions(strings_can_be_null=True)
            return _dedupe(pa_csv.read_csv(path, convert_options=options))
        return _dedupe(pq.read_table(path))
    except (pa.ArrowInvalid, OSError) as error:
        raise UsageError(f"not a results file: {error}", source=str(path)) from None


def read_rows(path: str | Path) -> list[dict[str, Any]]:
    """:func:`read_results` as a list of dicts."""
    return read_results(path).to_pylist()


class ResultStore:
    """An append-only results file or dataset at ``path`` (format from the suffix).

    Parameters
    ----------
    path
        ``*.csv`` for CSV; anything else is a Parquet dataset directory.
    """

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.is_csv = self.path.suffix == ".csv"
        if not self.is_csv and self.path.is_file():
            raise UsageError(
                "exists and is a file; a sweep writes a Parquet dataset (a directory)",
                source=str(self.path),
            )

    def exists(self) -> bool:
        """Whether any result has been written there."""
        if self.is_csv:
            return self.path.is_file()
        return self.path.is_dir() and bool(_parts(self.path))

    def clear(self) -> None:
        """Remove what is there (a fresh sweep over an old output)."""
        if self.is_csv:
            self.path.unlink(missing_ok=True)
        elif self.path.is_dir():
            shutil.rmtree(self.path)

    def finished(self, *, include_errors: bool = True) -> set[str]:
        """Ids of the points already recorded (optionally leaving out those that failed)."""
        if not self.exists():
            return set()
        table = read_results(self.path)
        if "point_id" not in table.column_names:
            return set()
        ids = table.column("point_id").to_pylist()
        if include_errors or "status" not in table.column_names:
            return set(ids)
        return {
            i for i, s in zip(ids, table.column("status").to_pylist(), strict=True) if s == "ok"
        }

    def append(self, rows: Sequence[dict[str, Any]]) -> None:
        """Write ``rows`` durably now (a new part file, or appended CSV lines)."""
        if not rows:
            return
        if self.is_csv:
            self._append_csv(rows)
        else:
            self._append_parquet(table_from_rows(rows))

    def compact(self) -> None:
        """Merge a dataset's parts into one (rows deduplicated); a no-op for CSV or one part."""
        if self.is_csv or not self.path.is_dir():
            return
        parts = _parts(self.path)
        if len(parts) <= 1:
            return
        table = read_results(self.path)
        self._append_parquet(table)  # written first: a kill here leaves duplicates, read as one
        for part in parts:
            part.unlink()

    def _append_parquet(self, table: pa.Table) -> None:
        self.path.mkdir(parents=True, exist_ok=True)
        parts = _parts(self.path)
        seq = int(parts[-1].name[5:11]) + 1 if parts else 0
        final = self.path / _PART.format(seq)
        tmp = self.path / f".tmp-{final.name}"
        pq.write_table(table, tmp)
        os.replace(tmp, final)

    def _append_csv(self, rows: Sequence[dict[str, Any]]) -> None:
        header = self._csv_header()
        new = [k for k in _keys(rows) if k not in header]
        if header and not new:
            with self.path.open("a", newline="", encoding="utf-8") as handle:
                _write_csv(handle, header, rows, with_header=False)
                handle.flush()
                os.fsync(handle.fileno())
            return
        old: list[dict[str, Any]] = []
        if header:
            with self.path.open(newline="", encoding="utf-8") as handle:
                old = list(csv.DictReader(handle))
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_name(f".tmp-{self.path.name}")
        with tmp.open("w", newline="", encoding="utf-8") as handle:
            _write_csv(handle, header + new, [*old, *rows], with_header=True)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, self.path)

    def _csv_header(self) -> list[str]:
        if not self.path.is_file():
            return []
        with self.path.open(newline="", encoding="utf-8") as handle:
            return next(csv.reader(handle), [])


def _keys(rows: Iterable[dict[str, Any]]) -> list[str]:
    keys: dict[str, None] = {}
    for row in rows:
        keys.update(dict.fromkeys(row))
    return list(keys)


def _write_csv(
    handle: Any, header: list[str], rows: Iterable[dict[str, Any]], *, with_header: bool
) -> None:
    writer = csv.DictWriter(handle, fieldnames=header, lineterminator="\n", restval="")
    if with_header:
        writer.writeheader()
    for row in rows:
        writer.writerow({k: "" if v is None else v for k, v in row.items()})
