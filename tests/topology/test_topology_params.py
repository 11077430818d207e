"""Builder parameters on the command line are checked against the builder's defaults."""

from __future__ import annotations

import pytest

from scaleup.errors import UsageError
from scaleup.topology import resolve_topology


@pytest.mark.parametrize("text", ["ualink-pod:n=abc", "ualink-pod:n=1.5", "ualink-pod:n=true"])
def test_a_number_parameter_must_be_a_number(text):
    with pytest.raises(UsageError, match="parameter 'n' must be int"):
        resolve_topology(text)


def test_good_parameters_still_build():
    assert len(resolve_topology("ualink-pod:n=64").accelerators) == 64
