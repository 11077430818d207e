"""The curated top-level API: every advertised name resolves; nothing else does."""

from __future__ import annotations

import pytest

import scaleup


@pytest.mark.parametrize("name", scaleup.__all__)
def test_every_public_name_resolves(name):
    assert getattr(scaleup, name) is not None


def test_unknown_names_raise_attribute_error():
    with pytest.raises(AttributeError, match="no attribute"):
        scaleup.not_a_thing  # noqa: B018
