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


def test_no_public_name_is_also_a_subpackage():
    """``scaleup.tune`` is the package; a function of that name would be shadowed by it as soon
    as anything imports the package."""
    import importlib.util

    clashes = [n for n in scaleup.__all__ if importlib.util.find_spec(f"scaleup.{n}") is not None]
    assert not clashes
