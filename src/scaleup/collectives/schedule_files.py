"""Schedule files by their format: scaleup's JSON or MSCCL XML, read and written in one place.

A file whose name ends in ``.xml`` (or whose text starts with ``<``) is MSCCL XML
(:mod:`scaleup.collectives.msccl_import`); anything else is the JSON of
:meth:`~scaleup.collectives.schedule.Schedule.to_dict`. ``count`` sizes an XML schedule (JSON
files carry their own); for JSON it must be left out.
"""

from __future__ import annotations

from pathlib import Path

from scaleup.collectives.msccl_export import schedule_to_msccl_xml
from scaleup.collectives.msccl_import import schedule_from_msccl_xml
from scaleup.collectives.schedule import Schedule
from scaleup.errors import InputError, UsageError
from scaleup.files import read_text

__all__ = ["FORMATS", "is_msccl_xml", "load_schedule", "schedule_text"]

#: Formats a schedule is written in: scaleup's JSON and MSCCL XML.
FORMATS = ("json", "msccl-xml")


def is_msccl_xml(path: str | Path, text: str) -> bool:
    """Whether ``path`` (and its ``text``) is MSCCL XML rather than scaleup's JSON."""
    return str(path).lower().endswith(".xml") or text.lstrip().startswith("<")


def load_schedule(path: str | Path, *, count: int | None = None) -> Schedule:
    """The Schedule in ``path`` (JSON or MSCCL XML); unreadable or bad files raise InputError."""
    text = read_text(path, InputError)
    if is_msccl_xml(path, text):
        return schedule_from_msccl_xml(text, source=str(path), count=count)
    if count is not None:
        raise UsageError("--count sizes MSCCL XML files only; a JSON schedule has its own",
                         source="--count")  # fmt: skip
    return Schedule.from_json(text, source=str(path))


def schedule_text(schedule: Schedule, fmt: str, *, protocol: str | None = None) -> str:
    """``schedule`` written as ``fmt`` (one of :data:`FORMATS`)."""
    if fmt == "json":
        return schedule.to_json(indent=1) + "\n"
    if fmt == "msccl-xml":
        return schedule_to_msccl_xml(schedule, protocol=protocol)
    raise UsageError(f"unknown format {fmt!r}; known: {', '.join(FORMATS)}", source="--format")
