"""Rendering helpers shared by the command groups: rich tables, JSON, CSV, plot files.

Only ``cli/`` prints; every command renders library results through these helpers so that the
table, ``--json`` and ``--csv`` forms show the same data.
"""

from __future__ import annotations

import csv
import io
import json
import math
from collections.abc import Mapping, Sequence
from typing import Any

from rich.console import Console
from rich.table import Table

__all__ = ["console", "err_console", "print_csv", "print_json", "print_table", "to_jsonable"]

console = Console(highlight=False, soft_wrap=True)
err_console = Console(stderr=True, highlight=False, soft_wrap=True)


def to_jsonable(obj: Any) -> Any:
    """Turn library results (dataclasses with ``to_dict``, numpy scalars, tuples) into JSON data."""
    if hasattr(obj, "to_dict"):
        return to_jsonable(obj.to_dict())
    if isinstance(obj, Mapping):
        return {str(k): to_jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [to_jsonable(v) for v in obj]
    if hasattr(obj, "item") and callable(obj.item):  # numpy scalar
        return to_jsonable(obj.item())
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    return obj


def print_json(obj: Any) -> None:
    """Print ``obj`` as indented JSON on stdout (no rich markup, so it parses)."""
    print(json.dumps(to_jsonable(obj), indent=2))


def print_csv(rows: Sequence[Mapping[str, Any]]) -> None:
    """Print rows (dicts sharing keys) as CSV on stdout."""
    if not rows:
        return
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=list(rows[0].keys()), lineterminator="\n")
    writer.writeheader()
    for row in rows:
        writer.writerow({k: to_jsonable(v) for k, v in row.items()})
    print(buffer.getvalue(), end="")


def print_table(
    columns: Sequence[str],
    rows: Sequence[Sequence[Any]],
    *,
    title: str | None = None,
    right_align: bool = True,
) -> None:
    """Print a rich table; numbers right-aligned as nccl-tests' columns are."""
    table = Table(title=title, show_lines=False, header_style="bold")
    for column in columns:
        table.add_column(column, justify="right" if right_align else "left")
    for row in rows:
        table.add_row(*("" if v is None else str(v) for v in row))
    console.print(table)
