"""Hypothesis strategies for fuzzing scaleup's inputs: nasty values, and documents that break.

Values are drawn from where parsers break: small numbers (valid, cheap), numbers at and past
the integer widths (2**31, 2**63, 2**64) and far past any limit (10**400), negative numbers,
infinities and NaN, empty, long and unusual text. Mid-range valid sizes (a 1,000-rank ring) are
left out on purpose: they are legitimately slow, which the limits do not forbid; the limits are
checked at their boundaries by the regression tests.

Documents (topology and model TOML, schedule JSON) are drawn as a valid base that is then
mutated (:func:`mutated`): a value replaced by a nasty one, a key dropped or added, a list
replaced by a scalar, a value nested thousands deep. :func:`toml_text` and :func:`json_text`
write any such value, including ones the standard writers cannot (deep nesting, big ints).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any

from hypothesis import strategies as st

__all__ = [
    "Deep",
    "cli_text",
    "documents",
    "flag_args",
    "json_text",
    "mutated",
    "nasty_floats",
    "nasty_ints",
    "nasty_number_text",
    "nasty_values",
    "size_text",
    "toml_text",
]

#: Integers at and past the widths parsers use, and far past every limit.
HUGE_INTS = (
    2**31 - 1, 2**31, 2**32, 2**53 + 1, 2**63 - 1, 2**63, 2**64, 10**18, 10**30, 10**400,
    -(2**31), -(2**63), -(10**400),
)  # fmt: skip
SPECIAL_FLOATS = (math.inf, -math.inf, math.nan, 0.0, -0.0, 1e308, 1e300, 5e-324, 1e-300)


@dataclass(frozen=True)
class Deep:
    """A list nested ``depth`` times (written iteratively: the writers do not recurse into it)."""

    depth: int


def nasty_ints() -> st.SearchStrategy[int]:
    """Small integers (mostly valid) and integers at or past every width and limit."""
    return st.one_of(st.integers(-2, 16), st.sampled_from(HUGE_INTS), st.integers(2**31, 2**80))


def nasty_floats() -> st.SearchStrategy[float]:
    """Ordinary floats and the special ones: infinities, NaN, -0.0, the extremes."""
    return st.one_of(
        st.sampled_from(SPECIAL_FLOATS),
        st.floats(allow_nan=True, allow_infinity=True),
        st.floats(0.01, 4.0),
    )


def cli_text(max_size: int = 40) -> st.SearchStrategy[str]:
    """Text a shell could pass as one argument (no NUL byte: argv cannot carry it), including
    long strings."""
    chars = st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00")
    odd = st.sampled_from(("", " ", "-", "--", "-1", "a,b", "x:y=z", "../", "~", "\n", "é", "🙂"))
    long = st.sampled_from((255, 256, 300, 4096, 4097, 5000)).map(lambda n: "x" * n)
    return st.one_of(st.text(chars, max_size=max_size), odd, long)


def nasty_number_text() -> st.SearchStrategy[str]:
    """Numbers as a user would type them, valid or not: mostly integers (most number flags take
    one), then floats, ``inf``, ``1e999``."""
    odd = ("inf", "-inf", "nan", "1e999", "0x10", "1_000", "", " ", "1.5", "-0")
    ints = nasty_ints().map(str)
    return st.one_of(ints, ints, ints, nasty_floats().map(repr), st.sampled_from(odd))


def size_text() -> st.SearchStrategy[str]:
    """Sizes as typed (``64K``, ``1.5M``, ``8 GiB``), small valid ones and nasty ones."""
    number = st.one_of(
        st.integers(0, 4096).map(str),
        nasty_ints().map(str),
        st.sampled_from(("1.5", "0.5", "0.1", "1.", ".5", "1e3", "١٢")),
    )
    suffix = st.sampled_from(("", "K", "M", "G", "T", "P", "B", "KB", "KiB", "k", "gib", "x"))
    space = st.sampled_from(("", " ", "\t"))
    return st.one_of(
        st.tuples(space, number, space, suffix, space).map("".join),
        cli_text(),
    )


@st.composite
def flag_args(draw: st.DrawFn, options: dict[str, st.SearchStrategy[str]]) -> list[str]:
    """A random subset of ``options`` (flag -> value strategy; ``None`` values are switches)."""
    args: list[str] = []
    for flag in draw(st.lists(st.sampled_from(sorted(options)), unique=True, max_size=4)):
        value = options[flag]
        args += [flag] if value is None else [flag, draw(value)]
    return args


def nasty_values(*, with_none: bool = True) -> st.SearchStrategy[Any]:
    """Any scalar or small container a document could hold in place of the right value."""
    scalars = st.one_of(
        nasty_ints(),
        nasty_floats(),
        st.booleans(),
        cli_text(),
        st.builds(Deep, st.integers(500, 5000)),
        st.just([]),
        st.just({}),
        *([st.none()] if with_none else []),
    )
    return st.one_of(scalars, st.lists(scalars, max_size=3))


@st.composite
def mutated(draw: st.DrawFn, base: st.SearchStrategy[Any], *, with_none: bool = True) -> Any:
    """``base`` with up to three mutations: a value replaced, a key dropped or added."""
    doc = draw(base)
    for _ in range(draw(st.integers(0, 3))):
        doc = _mutate_once(draw, doc, with_none)
    return doc


@st.composite
def documents(
    draw: st.DrawFn, base: st.SearchStrategy[Any], write: Any, *, with_none: bool = True
) -> str:
    """Text of a document: ``base`` mutated (3 in 5), valid (1 in 10), truncated (1 in 10) or
    arbitrary text (1 in 5); ``write`` turns a document into text."""
    kind = draw(st.integers(0, 9))
    if kind < 6:
        return str(write(draw(mutated(base, with_none=with_none))))
    text = str(write(draw(base)))
    if kind == 6:
        return text
    if kind == 7:
        return text[: draw(st.integers(0, len(text)))]
    return draw(cli_text(200))


def _mutate_once(draw: st.DrawFn, doc: Any, with_none: bool, depth: int = 0) -> Any:
    """One mutation at a random place below the top (copies the containers on the way down)."""
    if isinstance(doc, dict) and doc and (depth == 0 or draw(st.integers(0, 3))):
        key = draw(st.sampled_from(sorted(doc, key=str)))
        out = dict(doc)
        action = draw(st.sampled_from(("descend", "descend", "drop", "add")))
        if action == "drop":
            del out[key]
        elif action == "add":
            out[draw(cli_text(12))] = draw(nasty_values(with_none=with_none))
        else:
            out[key] = _mutate_once(draw, doc[key], with_none, depth + 1)
        return out
    if isinstance(doc, list) and doc and (depth == 0 or draw(st.integers(0, 3))):
        i = draw(st.integers(0, len(doc) - 1))
        return [*doc[:i], _mutate_once(draw, doc[i], with_none, depth + 1), *doc[i + 1 :]]
    return draw(nasty_values(with_none=with_none))


def _float_toml(value: float) -> str:
    if math.isnan(value):
        return "nan"
    if math.isinf(value):
        return "inf" if value > 0 else "-inf"
    return repr(value)


def toml_value(value: Any) -> str:
    """``value`` as a TOML inline value (``None``, which TOML lacks, as an empty table)."""
    if isinstance(value, Deep):
        return "[" * value.depth + "]" * value.depth
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return _float_toml(value)
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)  # JSON's escapes are TOML's too
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    if isinstance(value, dict):
        items = (f"{toml_value(str(k))} = {toml_value(v)}" for k, v in value.items())
        return "{" + ", ".join(items) + "}"
    return "{}"


def toml_text(doc: Any) -> str:
    """A TOML document: top-level keys one per line; a non-table becomes one key ``value``."""
    if not isinstance(doc, dict):
        return f"value = {toml_value(doc)}\n"
    return "".join(f"{toml_value(str(k))} = {toml_value(v)}\n" for k, v in doc.items())


def json_text(value: Any) -> str:
    """``value`` as JSON, with ``Deep`` nesting, NaN and infinities as Python's json writes them."""
    if isinstance(value, Deep):
        return "[" * value.depth + "]" * value.depth
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(json_text(v) for v in value) + "]"
    if isinstance(value, dict):
        items = (f"{json.dumps(str(k))}: {json_text(v)}" for k, v in value.items())
        return "{" + ", ".join(items) + "}"
    return json.dumps(value)
