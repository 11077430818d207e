"""Fuzz model TOML files (``plan --model-file``): small valid transformers, mutated (huge or
negative shapes, wrong types, ``top_k > experts``, unknown keys, deep nesting), and broken TOML.

Each file is planned on a two-GPU fabric (``h100-nvl-pair``: few collectives to simulate); the
run must end in one line and exit 0 or 2 within 10 s and 1 GiB.
"""

from __future__ import annotations

import pytest
from fuzz_support import EXAMPLES, fuzz, run_cli, write_input
from hypothesis import strategies as st
from strategies_fuzz import documents, toml_text


@st.composite
def model_bodies(draw: st.DrawFn) -> dict:
    """The fields of a tiny valid model (few distinct collective sizes, so the tuner's caches
    keep valid cases cheap)."""
    heads = draw(st.sampled_from((1, 2, 4)))
    body = {
        "layers": draw(st.integers(1, 4)),
        "hidden": heads * draw(st.sampled_from((16, 64))),
        "heads": heads,
        "ffn": draw(st.sampled_from((64, 256))),
        "vocab": draw(st.sampled_from((100, 1000))),
        "seq": draw(st.sampled_from((64, 512))),
    }
    if draw(st.booleans()):
        body["kv_heads"] = 1
    if draw(st.booleans()):
        body.update(experts=4, top_k=2)
    if draw(st.booleans()):
        body["aliases"] = ["mm"]
    return body


def _file(body: object) -> str:
    """The model file holding ``body`` as model ``m`` (the mutations land in its fields)."""
    return toml_text({"models": {"m": body}})


_DOCUMENTS = documents(model_bodies(), _file, with_none=False)


def _check(text: str) -> None:
    path = write_input("models.toml", text)
    result = run_cli(["plan", "--model", "m", "--model-file", str(path), "-t", "h100-nvl-pair"])
    assert result.exit_code in (0, 2)


@pytest.mark.parametrize("examples", EXAMPLES)
def test_fuzz_model_toml(examples: int) -> None:
    fuzz(_DOCUMENTS, _check, examples)
