"""Fuzz schedule JSON files: real schedules of the algorithm library, mutated (offsets and ranks
past 2**31 and 2**63, negative ids, NaN counts, deep nesting, dropped keys), and broken JSON.

Each file is replayed with ``schedule verify --file``: exit 0 (correct), 1 (fails verification,
naming the op) or 2 (not a schedule), in one line, within 10 s and 1 GiB.
"""

from __future__ import annotations

import functools

import pytest
from fuzz_support import EXAMPLES, fuzz, run_cli, write_input
from hypothesis import strategies as st
from strategies_fuzz import documents, json_text, mutated

from scaleup.collectives.algorithms import build_schedule
from scaleup.collectives.spec import CollectiveSpec

_BASES = (
    ("ring", "all_reduce", 3),
    ("tree", "broadcast", 4),
    ("direct", "all_to_all", 2),
    ("nvls", "all_gather", 2),
    ("recursive", "reduce_scatter", 4),
)


@functools.cache
def _schedule_dict(i: int) -> dict:
    algorithm, collective, n = _BASES[i]
    return build_schedule(algorithm, CollectiveSpec(collective, nranks=n, count=4 * n)).to_dict()


_SCHEDULES = st.integers(0, len(_BASES) - 1).map(_schedule_dict)


@st.composite
def _op_mutated(draw: st.DrawFn) -> dict:
    """A schedule with one op mutated (the ops are where offsets, ranks and ids live)."""
    doc = draw(_SCHEDULES)
    ops = list(doc["ops"])
    i = draw(st.integers(0, len(ops) - 1))
    ops[i] = draw(mutated(st.just(ops[i])))
    return {**doc, "ops": ops}


_DOCUMENTS = documents(st.one_of(_op_mutated(), _op_mutated(), _SCHEDULES), json_text)


def _check(text: str) -> None:
    path = write_input("schedule.json", text)
    run_cli(["schedule", "verify", "--file", str(path)])


@pytest.mark.parametrize("examples", EXAMPLES)
def test_fuzz_schedule_json(examples: int) -> None:
    fuzz(_DOCUMENTS, _check, examples)
