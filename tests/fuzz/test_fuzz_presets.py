"""Fuzz preset strings: ``name[:key=value,...]`` with random parameters and ``Nx`` prefixes.

Names are the registry's or any text; parameters the builder's own keys or others, with nasty
values (``planes=0``, ``n=10**400``, ``hosts=maybe``); ``N`` in ``Nx`` small, huge or zero.
Each spec is shown with ``topo show --json`` and must end in one line and exit 0 or 2 within
10 s and 1 GiB. Valid ``N`` stays small: a 200-server fabric is valid and slow to analyse.
"""

from __future__ import annotations

import inspect

import pytest
from fuzz_support import EXAMPLES, fuzz, run_cli
from hypothesis import strategies as st
from strategies_fuzz import cli_text, nasty_number_text

from scaleup.topology import PRESETS
from scaleup.topology.presets import MULTI_NODE_KEYS

_KEYS = sorted(
    {p for preset in PRESETS.values() for p in inspect.signature(preset.builder).parameters}
    | set(MULTI_NODE_KEYS)
)
_VALUE = st.one_of(
    nasty_number_text(),
    st.sampled_from(("true", "false", "ib-xdr", "eth-800g", "H100", "B200", "", "x=y")),
    cli_text(12),
)
_PARAM = st.builds(lambda k, v: f"{k}={v}", st.one_of(st.sampled_from(_KEYS), cli_text(8)), _VALUE)
_PRESET = st.sampled_from(sorted(PRESETS))


def _slow_to_build(text: str) -> bool:
    """A valid server count past 16 (up to MAX_RANKS): a fabric of thousands of devices is
    valid, takes seconds to analyse (tests/topology covers it) and would only test the clock."""
    try:
        return 16 < int(text) <= 16_384
    except ValueError:
        return False


_N = st.one_of(
    st.integers(0, 3).map(str), nasty_number_text().filter(lambda t: not _slow_to_build(t))
)


@st.composite
def preset_specs(draw: st.DrawFn) -> str:
    """``[Nx]name[:k=v,...]`` with nasty parts."""
    spec = draw(_PRESET if draw(st.integers(0, 3)) else cli_text())  # mostly real: reach builders
    if draw(st.booleans()):
        spec = f"{draw(_N)}x{spec}"
    params = draw(st.lists(_PARAM, max_size=3))
    if params or draw(st.booleans()):
        spec += ":" + ",".join(params)
    return spec


def _check(spec: str) -> None:
    result = run_cli(["topo", "show", "--json", "--", spec])  # "--": a spec may start with "-"
    assert result.exit_code in (0, 2)


@pytest.mark.parametrize("examples", EXAMPLES)
def test_fuzz_presets(examples: int) -> None:
    fuzz(preset_specs(), _check, examples)
