"""Reading a sweep's output: its part files, its marker and the rows they hold.

The layout (:data:`MARKER`, ``part-NNNNNN.parquet``) is what
:class:`scaleup.sweep.store.ResultStore` writes; the readers here are what ``scaleup report`` and
``--resume`` use, kept apart from the writer so each module has one job.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.csv as pa_csv
import pyarrow.parquet as pq

from scaleup.errors import UsageError
from scaleup.sweep.tables import dedupe_last, unify_tables

__all__ = [
    "MARKER",
    "OWN_RE",
    "PART",
    "PART_RE",
    "UNREADABLE",
    "part_number",
    "part_schema",
    "part_files",
    "read_provenance",
    "read_results",
    "read_rows",
    "write_atomic",
]

PART = "part-{:06d}.parquet"
PART_RE = re.compile(r"part-(\d{6,})\.parquet")
#: The file that marks a directory as a sweep's dataset (readers skip names starting with "_").
MARKER = "_scaleup_sweep.json"
#: Every name a store writes in its directory: the marker, parts, parts being written or set aside.
OWN_RE = re.compile(rf"(\.tmp-)?{re.escape(MARKER)}|(\.tmp-|\.damaged-)?part-\d{{6,}}\.parquet")
#: What pyarrow raises for a file it cannot read as Parquet or CSV.
UNREADABLE = (pa.ArrowException, OSError, ValueError)


def part_number(path: Path) -> int:
    match = PART_RE.fullmatch(path.name)
    return int(match.group(1)) if match else -1


def part_files(directory: Path) -> list[Path]:
    """The dataset's part files, in the order they were written."""
    try:
        found = [p for p in directory.iterdir() if part_number(p) >= 0 and p.is_file()]
    except OSError as error:
        raise UsageError(f"cannot read: {error.strerror or error}", source=str(directory)) from None
    return sorted(found, key=part_number)


def read_part(part: Path) -> pa.Table:
    try:
        return pq.read_table(part)
    except UNREADABLE as error:
        raise UsageError(
            f"damaged Parquet part ({first_line(error)}); a sweep run again with --resume "
            "evaluates its points again",
            source=str(part),
        ) from None


def first_line(error: BaseException) -> str:
    return (str(error).strip().splitlines() or [type(error).__name__])[0]


def read_results(path: str | Path) -> pa.Table:
    """All finished rows at ``path`` (a Parquet dataset directory, a Parquet file or a CSV).

    Raises
    ------
    UsageError
        ``path`` does not exist, is not a results file, or holds a damaged part (named).
    """
    path = Path(path)
    if path.is_dir():
        return dedupe_last(unify_tables([read_part(p) for p in part_files(path)]))
    if not path.is_file():
        raise UsageError("no such results file or directory", source=str(path))
    try:
        if path.suffix == ".csv":
            if path.stat().st_size == 0:
                return pa.table({})
            options = pa_csv.ConvertOptions(strings_can_be_null=True)
            return dedupe_last(pa_csv.read_csv(path, convert_options=options))
        return dedupe_last(pq.read_table(path))
    except UNREADABLE as error:
        raise UsageError(f"not a results file: {first_line(error)}", source=str(path)) from None


def read_provenance(path: str | Path) -> dict[str, str]:
    """What a dataset's marker says produced it (``spec``, ``scaleup_version``, ``started_utc``).

    Empty for a CSV, a dataset written before provenance was kept, or an unreadable marker.
    """
    try:
        marker = json.loads((Path(path) / MARKER).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    found = marker.get("provenance") if isinstance(marker, dict) else None
    return {str(k): str(v) for k, v in found.items()} if isinstance(found, dict) else {}


def read_rows(path: str | Path) -> list[dict[str, Any]]:
    """:func:`read_results` as a list of dicts."""
    return read_results(path).to_pylist()


def part_schema(part: Path) -> pa.Schema:
    """A part's schema; an empty one for a part that cannot be read (a damaged part is set aside
    by :meth:`ResultStore.finished`, so its points are evaluated again)."""
    try:
        return pq.read_schema(part)
    except UNREADABLE:
        return pa.schema([])


def write_atomic(path: Path, text: str) -> None:
    tmp = path.with_name(f".tmp-{path.name}")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)
