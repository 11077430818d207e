"""Reading the TOML files users write: one place turns OS, TOML and schema failures into one line.

Topology files, the hardware catalog, sweep specs and model files all go through here, so each
failure reads the same whatever the file type: ``FILE: cannot read: REASON``, ``FILE: not valid
TOML: ...``, ``FILE: ENTRY: RULE``. The caller passes its own :class:`~scaleup.errors.InputError`
subclass (what kind of file it is) and, for schema errors, how to name the entry.
"""

from __future__ import annotations

import sys
import tomllib
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from scaleup.errors import InputError

__all__ = ["deepest_error", "entry_name", "parse_toml", "read_text", "validate"]

Model = TypeVar("Model", bound=BaseModel)
#: ``ValidationError -> (entry or None, rule)``: how one file type names the entry at fault.
Locate = Callable[[ValidationError], tuple[str | None, str]]


def read_text(path: str | Path, error: type[InputError]) -> str:
    """The UTF-8 text of ``path``; ``error`` naming the file if it cannot be read."""
    source = str(path)
    try:
        return Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise error(f"cannot read: {exc.strerror or exc}", source=source) from None
    except UnicodeDecodeError as exc:
        raise error(f"cannot read: not UTF-8 text ({exc.reason})", source=source) from None


def parse_toml(text: str, error: type[InputError], source: str) -> dict[str, Any]:
    """The TOML document ``text``; ``error`` naming ``source`` if it is not TOML."""
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise error(f"not valid TOML: {exc}", source=source) from None
    except RecursionError:
        raise error("not valid TOML: nested too deeply", source=source) from None


def entry_name(loc: tuple[Any, ...]) -> str:
    """Pydantic's error location ``('bench', 0, 'sizes')`` -> ``bench[0].sizes``."""
    text = ""
    for part in loc:
        if isinstance(part, int):
            text += f"[{part}]"
        elif "[" in part or part in ("SizeRange", "str", "int", "float", "bool"):
            continue  # union branch names (list[...], SizeRange) say nothing to a user
        else:
            name = part if part.isprintable() else repr(part)
            text += f".{name}" if text else name
    return text


def deepest_error(error: ValidationError) -> tuple[str | None, str]:
    """The entry and rule of pydantic's deepest complaint (in a union, the branch meant)."""
    first = max(error.errors(), key=lambda e: len(e["loc"]))
    return entry_name(first["loc"]) or None, str(first["msg"]).removeprefix("Value error, ")


def validate(
    schema: type[Model],
    data: Any,
    error: type[InputError],
    source: str,
    locate: Locate = deepest_error,
) -> Model:
    """``data`` checked against ``schema``; ``error`` naming ``source`` and the entry if not.
    An integer too large for a float (TOML allows any length) in a float field makes pydantic's
    finiteness check raise ``OverflowError``: refused by name instead."""
    try:
        return schema.model_validate(data)
    except ValidationError as exc:
        entry, rule = locate(exc)
        raise error(rule, source=source, entry=entry) from None
    except OverflowError:
        huge = _huge_int(data, ())
        raise error(
            "number too large (more than a float holds)",
            source=source,
            entry=None if huge is None else entry_name(huge),
        ) from None


#: Beyond this an int does not convert to a float (IEEE 754 double's largest finite value).
_FLOAT_MAX = sys.float_info.max


def _huge_int(data: Any, loc: tuple[Any, ...]) -> tuple[Any, ...] | None:
    """The location of the first int in ``data`` (dicts and lists) too large for a float."""
    if isinstance(data, bool):
        return None
    if isinstance(data, int):
        return loc if abs(data) > _FLOAT_MAX else None
    if isinstance(data, dict):
        items: Any = data.items()
    elif isinstance(data, list):
        items = enumerate(data)
    else:
        return None
    for key, value in items:
        found = _huge_int(value, (*loc, key))
        if found is not None:
            return found
    return None
