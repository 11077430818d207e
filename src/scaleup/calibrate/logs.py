"""Reading nccl-tests and rccl-tests output: one :class:`LogRow` per printed size and placement.

Both tools print one table: a header line naming the columns (``# size count type redop root
time algbw busbw #wrong time algbw busbw #wrong``; older versions say ``error`` for ``#wrong``,
rccl-tests may add or drop columns), then one line per size with an out-of-place group and an
in-place group, each ``time algbw busbw`` plus a check column. The columns are found by the header's
names, not by position, so either layout (and ``scaleup bench``'s own output, which appends
``linkbw algo proto channels``) reads the same. A line whose ``time`` is not a number (``N/A``)
gives no row for that placement.

Around the table, what the log says about the run is kept when present:

- the collective: ``--collective``, else an ``<op>_perf`` binary named in the text or the file
  name, else ``all_reduce`` (recorded as assumed);
- the ranks: the ``#  Rank  N ...`` lines of ``# Using devices``;
- what NCCL chose, from ``NCCL_DEBUG=INFO`` with ``NCCL_DEBUG_SUBSYS=TUNING``:
  ``AllReduce: 1048576 Bytes -> Algo RING proto SIMPLE channel{Lo..Hi}={0..31}`` (names or
  NCCL's numeric ids). The row of that size is then pinned to the algorithm and protocol.

Every failure is one :class:`~scaleup.errors.LogFileError` naming the file and line.

>>> text = '''# size count type redop root time algbw busbw #wrong time algbw busbw #wrong
...          8     2 float   sum   -1 24.60  0.00  0.00      0 24.10  0.00  0.00      0'''
>>> [(r.size_bytes, r.placement, r.time_us) for r in parse_log(text, "x.log").rows]
[(8, 'out-of-place', 24.6), (8, 'in-place', 24.1)]
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, replace
from pathlib import Path

from scaleup.collectives.spec import COLLECTIVES, DTYPES
from scaleup.errors import LogFileError
from scaleup.files import read_text

__all__ = ["LogRow", "ParsedLog", "Pin", "parse_log", "read_logs"]

#: NCCL's algorithm and protocol ids (src/include/device.h NCCL_ALGO_*, NCCL_PROTO_*), for the
#: INFO lines of versions that print numbers.
_ALGO_IDS = ("tree", "ring", "collnet_direct", "collnet_chain", "nvls", "nvls_tree", "pat")
_PROTO_IDS = ("ll", "ll128", "simple")
#: NCCL's function names in INFO lines -> ours.
_FUNCS = {
    "allreduce": "all_reduce",
    "allgather": "all_gather",
    "reducescatter": "reduce_scatter",
    "broadcast": "broadcast",
    "reduce": "reduce",
    "alltoall": "all_to_all",
    "sendrecv": "send_recv",
}
_TUNING = re.compile(
    r"NCCL INFO (\w+): (\d+) Bytes -> Algo (\w+) proto (\w+)"
    r"(?: channel\{Lo\.\.Hi\}=\{(\d+)\.\.(\d+)\})?"
)
_BINARY = re.compile(r"\b(" + "|".join(COLLECTIVES) + r")_perf\b")
_RANK = re.compile(r"^#\s+Rank\s+(\d+)\b")
_PLACEMENTS = ("out-of-place", "in-place")


@dataclass(frozen=True)
class Pin:
    """What NCCL said it ran for one size (NCCL_DEBUG=INFO): algorithm, protocol, channels."""

    algorithm: str
    protocol: str
    channels: int | None = None


@dataclass(frozen=True)
class LogRow:
    """One measured time: a size of one placement in one log."""

    source: str
    line: int
    collective: str
    size_bytes: int
    dtype: str
    placement: str
    time_us: float
    pin: Pin | None = None


@dataclass(frozen=True)
class ParsedLog:
    """The rows of one log and what it says about the run."""

    source: str
    collective: str
    collective_assumed: bool
    ranks: int | None
    rows: tuple[LogRow, ...]


def _collective(text: str, source: str, collective: str | None) -> tuple[str, bool]:
    if collective is not None:
        return collective, False
    for hay in (text, Path(source).name):
        found = _BINARY.search(hay)
        if found:
            return found.group(1), False
    return "all_reduce", True


def _pins(text: str) -> dict[tuple[str, int], Pin]:
    """``{(collective, bytes): Pin}`` from NCCL_DEBUG TUNING lines (the last one of a size wins)."""
    out: dict[tuple[str, int], Pin] = {}
    for m in _TUNING.finditer(text):
        func = _FUNCS.get(m.group(1).lower())
        algo, proto = m.group(3).lower(), m.group(4).lower()
        if algo.isdigit() and int(algo) < len(_ALGO_IDS):
            algo = _ALGO_IDS[int(algo)]
        if proto.isdigit() and int(proto) < len(_PROTO_IDS):
            proto = _PROTO_IDS[int(proto)]
        if func is None or algo not in _ALGO_IDS or proto not in _PROTO_IDS:
            continue
        channels = int(m.group(6)) - int(m.group(5)) + 1 if m.group(5) else None
        out[(func, int(m.group(2)))] = Pin(algo, proto, channels)
    return out


def _header(tokens: list[str]) -> dict[str, list[int]] | None:
    """Column name -> positions, if ``tokens`` (a comment line's words) name the table's columns."""
    if not tokens or tokens[0] != "size" or "time" not in tokens:
        return None
    cols: dict[str, list[int]] = {}
    for i, name in enumerate(tokens):
        cols.setdefault(name, []).append(i)
    return cols


def _number(text: str) -> float | None:
    try:
        value = float(text)
    except ValueError:
        return None
    return value if math.isfinite(value) else None


def parse_log(text: str, source: str, *, collective: str | None = None) -> ParsedLog:
    """The rows of one nccl-tests / rccl-tests log (see the module docstring)."""
    op, assumed = _collective(text, source, collective)
    pins = _pins(text)
    cols: dict[str, list[int]] | None = None
    ranks: set[int] = set()
    rows: list[LogRow] = []
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or "NCCL INFO" in line or "RCCL INFO" in line:
            continue
        if line.startswith("#"):
            rank = _RANK.match(line)
            if rank:
                ranks.add(int(rank.group(1)))
            cols = _header(line.lstrip("#").split()) or cols
            continue
        words = line.split()
        if not words[0].isdigit():
            continue  # the tool's other output (hostnames, warnings)
        if cols is None:
            raise LogFileError("a size row before any column header", source=source,
                               entry=f"line {number}")  # fmt: skip
        rows += _row(words, cols, op, source, number)
    if not rows:
        raise LogFileError("no nccl-tests / rccl-tests rows (size ... time algbw busbw)",
                           source=source)  # fmt: skip
    n = len(ranks) or None
    return ParsedLog(source, op, assumed, n, tuple(_pinned(r, pins, n) for r in rows))


def _pinned(row: LogRow, pins: dict[tuple[str, int], Pin], ranks: int | None) -> LogRow:
    """``row`` with NCCL's stated choice of its size: NCCL prints the bytes of its ``count``,
    which for the blocked collectives is one rank's block of the size nccl-tests prints."""
    pin = pins.get((row.collective, row.size_bytes))
    if pin is None and ranks:
        pin = pins.get((row.collective, row.size_bytes // ranks))
    return row if pin is None else replace(row, pin=pin)


def _row(
    words: list[str],
    cols: dict[str, list[int]],
    op: str,
    source: str,
    number: int,
) -> list[LogRow]:
    where = f"line {number}"
    width = max(i for places in cols.values() for i in places) + 1
    if len(words) < min(width, cols["time"][-1] + 1):
        raise LogFileError(f"{len(words)} columns, the header names {width}", source=source,
                           entry=where)  # fmt: skip
    size = int(words[cols["size"][0]])
    dtype = words[cols["type"][0]].lower() if "type" in cols else "float"
    if dtype not in DTYPES:
        raise LogFileError(f"unknown type {dtype!r}", source=source, entry=where)
    out = []
    for placement, at in zip(_PLACEMENTS, cols["time"], strict=False):
        time_us = _number(words[at]) if at < len(words) else None
        if time_us is None or time_us <= 0:
            continue
        out.append(LogRow(source, number, op, size, DTYPES[dtype], placement, time_us))
    if not out and any(_number(words[at]) is None and words[at] != "N/A" for at in cols["time"]):
        raise LogFileError("time is not a number", source=source, entry=where)
    return out


def read_logs(paths: list[Path], *, collective: str | None = None) -> list[ParsedLog]:
    """Every log in ``paths``, parsed; the first unreadable or malformed one raises."""
    if not paths:
        raise LogFileError("no log given", source="LOG")
    out = []
    for path in paths:
        text = read_text(path, LogFileError)
        if not text.strip():
            raise LogFileError("empty file", source=str(path))
        out.append(parse_log(text, str(path), collective=collective))
    return out
