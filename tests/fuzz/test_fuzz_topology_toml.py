"""Fuzz topology TOML files: valid small fabrics, mutated (wrong types, huge numbers, dropped or
unknown keys, deep nesting), and text that is barely TOML.

Each document is written to a file and shown with ``topo show --json``; the run must end in one
line and exit 0 or 2 within 10 s and 1 GiB.
"""

from __future__ import annotations

import pytest
from fuzz_support import EXAMPLES, fuzz, run_cli, write_input
from hypothesis import strategies as st
from strategies_fuzz import documents, toml_text

_ACCELERATORS = ("H100", "A100", "MI300X", "B200", "H100-PCIe")
_TECHS = ("nvlink4", "nvlink3", "xgmi-mi300x", "nvlink5", "pcie5")


@st.composite
def topology_docs(draw: st.DrawFn) -> dict:
    """A valid-looking small fabric: 2..4 accelerators of one type, a chain of links."""
    i = draw(st.integers(0, len(_ACCELERATORS) - 1))
    n = draw(st.integers(2, 4))
    devices = [{"id": f"g{k}", "type": _ACCELERATORS[i]} for k in range(n)]
    links = [
        {"a": f"g{k}", "b": f"g{k + 1}", "tech": _TECHS[i], "count": draw(st.integers(1, 4))}
        for k in range(n - 1)
    ]
    doc = {"name": draw(st.sampled_from(("fuzz", "t"))), "devices": devices, "links": links}
    if draw(st.booleans()):
        links[0]["bandwidth_gb_per_s"] = draw(st.floats(1, 1000))
    return doc


_DOCUMENTS = documents(topology_docs(), toml_text, with_none=False)


def _check(text: str) -> None:
    path = write_input("topology.toml", text)
    result = run_cli(["topo", "show", "--json", str(path)])
    assert result.exit_code in (0, 2)


@pytest.mark.parametrize("examples", EXAMPLES)
def test_fuzz_topology_toml(examples: int) -> None:
    fuzz(_DOCUMENTS, _check, examples)
