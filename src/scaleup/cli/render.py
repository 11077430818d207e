"""Rendering helpers shared by the command groups: rich tables, JSON, CSV, plot files.

Only ``cli/`` prints; every command renders library results through these helpers so that the
table, ``--json`` and ``--csv`` forms show the same data. Every command with ``--json`` also has
``--csv`` (:func:`flatten` turns nested records into columns ``a.b``). Tables never truncate a
cell: on a terminal long cells fold, and when stdout is a pipe or a file a table is as wide as
its content (:func:`print_wide`).
"""

from __future__ import annotations

import contextlib
import csv
import io
import json
import math
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

from rich.console import Console, RenderableType
from rich.measure import Measurement

from scaleup.errors import UsageError

__all__ = [
    "activity",
    "check_one_format",
    "console",
    "err_console",
    "flatten",
    "print_csv",
    "print_json",
    "print_records",
    "print_table",
    "print_wide",
    "progress_bar",
    "to_jsonable",
]

console = Console(highlight=False, soft_wrap=True)
err_console = Console(stderr=True, highlight=False, soft_wrap=True)


def progress_bar() -> Any:
    """A rich progress bar (done/total) on stderr when stderr is a terminal, else None: pipes,
    files and CI logs get no control codes."""
    if not err_console.is_terminal:
        return None
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

    return Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        console=err_console,
        transient=True,
    )


@contextlib.contextmanager
def activity(description: str) -> Iterator[Callable[[str], None]]:
    """A spinner with the elapsed time on stderr while a slow step runs (only when stderr is a
    terminal); yields a function that renames the step."""
    if not err_console.is_terminal:
        yield lambda _text: None
        return
    from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

    with Progress(
        SpinnerColumn(),
        TextColumn("{task.description}"),
        TimeElapsedColumn(),
        console=err_console,
        transient=True,
    ) as bar:
        task = bar.add_task(description, total=None)
        yield lambda text: bar.update(task, description=text)


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


def flatten(obj: Any, prefix: str = "") -> dict[str, Any]:
    """One CSV row of a (nested) record: mappings become ``a.b`` columns, lists JSON text.

    >>> flatten({"name": "x", "memory": {"total": 3, "fits": True}, "tp": [1, 2]})
    {'name': 'x', 'memory.total': 3, 'memory.fits': True, 'tp': '[1,2]'}
    """
    data = to_jsonable(obj)
    if not isinstance(data, Mapping):
        return {prefix or "value": data}
    out: dict[str, Any] = {}
    for key, value in data.items():
        name = f"{prefix}.{key}" if prefix else str(key)
        if isinstance(value, Mapping) and value:
            out.update(flatten(value, name))
        elif isinstance(value, (list, Mapping)):
            out[name] = json.dumps(value, separators=(",", ":"))
        else:
            out[name] = value
    return out


def check_one_format(json_out: bool, csv_out: bool) -> None:
    """Refuse ``--json`` with ``--csv`` in one line."""
    if json_out and csv_out:
        raise UsageError("choose one of --json and --csv", source="--json/--csv")


def print_records(json_data: Any, csv_rows: Sequence[Any], *, csv_out: bool) -> None:
    """``--json`` prints ``json_data``; ``--csv`` prints ``csv_rows``, each flattened."""
    if csv_out:
        print_csv([flatten(r) for r in csv_rows])
    else:
        print_json(json_data)


def print_csv(rows: Sequence[Mapping[str, Any]]) -> None:
    """Print rows (dicts; columns in order of first appearance) as CSV on stdout."""
    if not rows:
        return
    fields = list(dict.fromkeys(k for row in rows for k in row))
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=fields, lineterminator="\n")
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
    from rich.table import Table  # here: nccl-tests' text table and JSON/CSV need none

    table = Table(title=title, show_lines=False, header_style="bold")
    for column in columns:
        table.add_column(column, justify="right" if right_align else "left", overflow="fold")
    for row in rows:
        table.add_row(*("" if v is None else str(v) for v in row))
    print_wide(table)


def print_wide(renderable: RenderableType, out: Console | None = None) -> None:
    """Print ``renderable``; when the console is not a terminal (a pipe, a file), as wide as it
    needs, so that no cell is cut to ``…`` for a width nobody will see."""
    out = out or console
    if out.is_terminal:
        out.print(renderable)
        return
    need = Measurement.get(out, out.options.update_width(100_000), renderable).maximum
    if need <= out.width:
        out.print(renderable)
        return
    saved = out.width
    out.width = need  # Console.print(width=) is capped at the console's width
    try:
        out.print(renderable)
    finally:
        out.width = saved
