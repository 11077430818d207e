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
Every part of a dataset is written with one schema (:mod:`scaleup.sweep.schema`), fixed before
the first point runs and kept in the marker file, so ``pyarrow.parquet.read_table(path)`` and
``pyarrow.dataset.dataset(path)`` read any prefix of a sweep. A row that needs a column or a
wider type than the schema has widens it, and the older parts are rewritten (each atomically,
first part first) before the new one lands. ``resume`` brings the parts of an older scaleup (each
with its own types) to one schema the same way; :func:`read_results` unifies them anyway.

A store only ever removes what scaleup wrote. A dataset directory carries a marker file
(:data:`MARKER`); ``overwrite`` removes the marker and the part files and nothing else, and a
directory without the marker, or with other files in it, is refused. A CSV is scaleup's when its
header starts with :data:`~scaleup.sweep.points.LEAD_COLUMNS`. A part file that cannot be read
(a truncated write, a bad disk) is an error naming it when reading results, and is set aside
(renamed ``.damaged-part-...``) on ``resume`` so that its points are evaluated again.
"""

from __future__ import annotations

import csv
import json
import os
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from scaleup.errors import UsageError
from scaleup.sweep.points import LEAD_COLUMNS
from scaleup.sweep.results import (
    MARKER,
    OWN_RE,
    PART,
    PART_RE,
    UNREADABLE,
    part_files,
    part_number,
    part_schema,
    read_provenance,
    read_results,
    read_rows,
    write_atomic,
)
from scaleup.sweep.schema import conform, schema_from_json, schema_to_json, widen
from scaleup.sweep.tables import dedupe_last, table_from_rows, unify_tables

__all__ = [
    "MARKER",
    "ResultStore",
    "read_provenance",
    "read_results",
    "read_rows",
    "table_from_rows",
]


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
        #: Part files found damaged and set aside by :meth:`finished` (their points are redone).
        self.damaged: list[str] = []
        self._schema: pa.Schema | None = None
        #: What produced the results (kept in the marker), None until :meth:`prepare`.
        self._provenance: dict[str, str] | None = None

    def _survey(self) -> tuple[str, list[str]]:
        """What is at ``path``: ``("none" | "empty" | "ours" | "foreign", [reasons or others])``."""
        if not os.path.lexists(self.path):
            return "none", []
        if self.is_csv:
            if not self.path.is_file():
                return "foreign", ["is not a regular file"]
            if self.path.stat().st_size == 0:
                return "empty", []
            if self._csv_header(limit=1 << 16)[: len(LEAD_COLUMNS)] == list(LEAD_COLUMNS):
                return "ours", []
            return "foreign", [f"is not a sweep's CSV (its header is not {','.join(LEAD_COLUMNS)})"]
        if not self.path.is_dir():
            return "foreign", ["is not a directory; a sweep writes a Parquet dataset (a directory)"]
        try:
            names = sorted(os.listdir(self.path))
        except OSError as error:
            raise UsageError(f"cannot read: {error.strerror or error}", source=str(self)) from None
        if not names:
            return "empty", []
        if MARKER not in names:
            return "foreign", [f"holds files but no {MARKER}: not a sweep's output"]
        if not any(PART_RE.fullmatch(n) for n in names):
            return "empty", []  # a sweep that stopped before its first row: nothing to keep
        return "ours", [n for n in names if not OWN_RE.fullmatch(n)]

    def exists(self) -> bool:
        """Whether a sweep's results are there."""
        return self._survey()[0] == "ours"

    def prepare(
        self,
        *,
        resume: bool = False,
        overwrite: bool = False,
        schema: pa.Schema | None = None,
        provenance: Mapping[str, str] | None = None,
    ) -> None:
        """Make ``path`` ready for a sweep, before any point runs.

        A new path or an empty directory (or empty file) is taken; a sweep's own output is
        continued (``resume``) or cleared (``overwrite``: only the files a store writes); anything
        else is refused. ``schema`` is the rows' (:func:`scaleup.sweep.schema.sweep_schema`):
        every part is written with it; a resumed dataset's parts are brought to it (widened by
        what they hold). A CSV has no schema. ``provenance`` (what produced the results: spec
        path, version, date) is kept in a dataset's marker file, for :func:`read_provenance`; a
        resumed dataset keeps the one it has when none is given.

        Raises
        ------
        UsageError
            ``path`` holds something a sweep did not write, holds a sweep's output and neither
            ``resume`` nor ``overwrite`` is given, or cannot be written.
        """
        what, notes = self._survey()
        if what == "foreign":
            raise UsageError(
                f"{notes[0]}; not touching it (choose another output)", source=str(self)
            )
        if what == "ours" and not resume:
            if not overwrite:
                raise UsageError(
                    "already exists; use --resume to continue it or --force to replace it",
                    source=str(self),
                )
            if notes:
                shown = ", ".join(notes[:3]) + (", ..." if len(notes) > 3 else "")
                raise UsageError(
                    f"also holds files a sweep did not write ({shown}); --force removes only a "
                    "sweep's own files, so move those first",
                    source=str(self),
                )
            self.clear()
        try:
            if self.is_csv:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                self.path.open("a", encoding="utf-8").close()
            else:
                self.path.mkdir(parents=True, exist_ok=True)
                kept = read_provenance(self.path) if what == "ours" and resume else {}
                self._provenance = dict(provenance or kept)
                if what == "ours" and resume:
                    self._reconcile(schema)
                else:
                    self._evolve(schema or pa.schema([]))
        except OSError as error:
            raise UsageError(
                f"cannot write here: {error.strerror or error}", source=str(self)
            ) from None

    def clear(self) -> None:
        """Remove the results a store wrote there (and only those)."""
        try:
            if self.is_csv:
                self.path.unlink(missing_ok=True)
            elif self.path.is_dir():
                for entry in self.path.iterdir():
                    if OWN_RE.fullmatch(entry.name) and entry.is_file():
                        entry.unlink()
        except OSError as error:
            raise UsageError(f"cannot clear: {error.strerror or error}", source=str(self)) from None

    def __str__(self) -> str:
        return str(self.path)

    def finished(self, *, include_errors: bool = True) -> set[str]:
        """Ids of the points already recorded (optionally leaving out those that failed).

        A damaged part file is renamed ``.damaged-<name>`` and listed in :attr:`damaged`; its
        points count as not done.
        """
        if self.is_csv:
            table = read_results(self.path) if self.path.is_file() else pa.table({})
        elif self.path.is_dir():
            tables = []
            for part in part_files(self.path):
                try:
                    tables.append(pq.read_table(part))
                except UNREADABLE:
                    self._set_aside(part)
            table = dedupe_last(unify_tables(tables))
        else:
            return set()
        if "point_id" not in table.column_names:
            return set()
        ids = table.column("point_id").to_pylist()
        if include_errors or "status" not in table.column_names:
            return set(ids)
        return {
            i for i, s in zip(ids, table.column("status").to_pylist(), strict=True) if s == "ok"
        }

    def _set_aside(self, part: Path) -> None:
        try:
            os.replace(part, part.with_name(f".damaged-{part.name}"))
        except OSError as error:
            raise UsageError(
                f"damaged Parquet part, and it cannot be set aside: {error.strerror or error}",
                source=str(part),
            ) from None
        self.damaged.append(str(part))

    def append(self, rows: Sequence[dict[str, Any]]) -> None:
        """Write ``rows`` durably now (a new part file, or appended CSV lines)."""
        if not rows:
            return
        try:
            if self.is_csv:
                self._append_csv(rows)
            else:
                self._append_parquet(table_from_rows(rows))
        except OSError as error:
            raise UsageError(
                f"cannot write results: {error.strerror or error}", source=str(self)
            ) from None

    def compact(self) -> None:
        """Merge a dataset's parts into one (rows deduplicated); a no-op for CSV or one part."""
        if self.is_csv or not self.path.is_dir():
            return
        parts = part_files(self.path)
        if len(parts) <= 1:
            return
        table = read_results(self.path)
        try:
            self._append_parquet(table)  # written first: a kill here leaves duplicates, read as one
            for part in parts:
                part.unlink()
        except OSError as error:
            raise UsageError(
                f"cannot compact: {error.strerror or error}", source=str(self)
            ) from None

    def schema(self) -> pa.Schema:
        """The dataset's schema: the marker's, else (an older sweep's) its parts' unified."""
        if self._schema is None:
            self._schema = self._marker_schema()
        if self._schema is None:
            self._schema = pa.schema([])
            for part in part_files(self.path) if self.path.is_dir() else []:
                self._schema = widen(self._schema, part_schema(part))
        return self._schema

    def _marker_schema(self) -> pa.Schema | None:
        try:
            data = json.loads((self.path / MARKER).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        return schema_from_json(data.get("columns")) if isinstance(data, dict) else None

    def _reconcile(self, schema: pa.Schema | None) -> None:
        """Bring a resumed dataset to one schema: the marker's, its parts' and ``schema``."""
        wide = self._marker_schema() or pa.schema([])
        for part in part_files(self.path):
            wide = widen(wide, part_schema(part))
        self._evolve(widen(wide, schema) if schema is not None else wide)

    def _evolve(self, schema: pa.Schema) -> None:
        """Make ``schema`` the dataset's: in the marker, then in every part (first part first,
        each rewritten atomically), so a reader meets the widest types in the first part."""
        self._schema = schema
        marker = {
            "written_by": "scaleup sweep",
            "format": "parquet dataset",
            "version": 2,
            "columns": schema_to_json(schema),
            "provenance": dict(
                self._provenance if self._provenance is not None else read_provenance(self.path)
            ),
        }
        write_atomic(self.path / MARKER, json.dumps(marker) + "\n")
        for part in part_files(self.path):
            if part_schema(part).equals(schema, check_metadata=False):
                continue
            try:
                table = pq.read_table(part)
            except UNREADABLE:
                continue  # damaged: finished() sets it aside
            self._write_part(conform(table, schema), part)

    def _append_parquet(self, table: pa.Table) -> None:
        self.path.mkdir(parents=True, exist_ok=True)
        schema = self.schema()
        wide = widen(schema, table.schema)
        if not wide.equals(schema):
            self._evolve(wide)
        parts = part_files(self.path)
        final = self.path / PART.format(part_number(parts[-1]) + 1 if parts else 0)
        self._write_part(conform(table, wide), final)

    @staticmethod
    def _write_part(table: pa.Table, final: Path) -> None:
        """Write ``table`` to ``final`` whole or not at all (a temporary name, then a rename)."""
        tmp = final.with_name(f".tmp-{final.name}")
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

    def _csv_header(self, limit: int = -1) -> list[str]:
        """The CSV's first row (of at most ``limit`` characters; [] if it is not text)."""
        if not self.path.is_file():
            return []
        try:
            with self.path.open(newline="", encoding="utf-8") as handle:
                lines = handle if limit < 0 else [handle.readline(limit)]
                return next(csv.reader(lines), [])
        except (UnicodeDecodeError, csv.Error):
            return []


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
