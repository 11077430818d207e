"""Topology files: exact round trip, and one-line errors naming the file, the entry, the rule."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from strategies_topology import topologies

from scaleup.errors import TopologyFileError
from scaleup.topology import Topology, dumps, load_topology, loads, resolve_topology, save_topology
from scaleup.topology.presets import PRESETS

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"

GOOD = """\
name = "two-h100"
description = "two H100 joined by 18 NVLink4 links"
peer_access = false

[[devices]]
id = "g0"
type = "H100"

[[devices]]
id = "g1"
type = "H100"
node = 1

[[links]]
a = "g0"
b = "g1"
tech = "nvlink4"
count = 18
bandwidth_gb_per_s = 25.0
"""


@given(topologies())
def test_round_trip_generated(t: Topology) -> None:
    text = dumps(t)
    back = loads(text)
    assert back == t
    assert dumps(back) == text


def test_round_trip_canonical_text_is_exact() -> None:
    t = loads(GOOD)
    assert t.peer_access is False
    assert t.device("g1").node == 1
    assert dumps(t) == GOOD


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_round_trip_presets(name: str, tmp_path: Path) -> None:
    t = resolve_topology(name)
    path = tmp_path / f"{name}.toml"
    save_topology(t, path)
    assert load_topology(path) == t
    assert path.read_text() == dumps(t)


def test_examples_load_and_are_canonical() -> None:
    files = sorted(EXAMPLES.glob("*.toml"))
    topology_files = [f for f in files if "[[devices]]" in f.read_text()]
    assert len(topology_files) >= 2
    for path in topology_files:
        t = load_topology(path)
        assert dumps(t) == path.read_text(), path.name


def _error(tmp_path: Path, text: str) -> TopologyFileError:
    path = tmp_path / "bad.toml"
    path.write_text(text)
    with pytest.raises(TopologyFileError) as info:
        load_topology(path)
    error = info.value
    assert error.source == str(path)
    assert "\n" not in error.one_line()
    assert str(path) in error.one_line()
    return error


def test_not_toml(tmp_path: Path) -> None:
    assert "not valid TOML" in _error(tmp_path, "name = \n[[devices]\n").message


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(TopologyFileError, match="cannot read"):
        load_topology(tmp_path / "nope.toml")


@pytest.mark.parametrize(
    ("old", "new", "entry", "words"),
    [
        (
            'type = "H100"\n\n[[devices]]\nid = "g1"',
            'type = "H1000"\n\n[[devices]]\nid = "g1"',
            "g0",
            "unknown device type 'H1000'",
        ),
        ('tech = "nvlink4"', 'tech = "nvlink9"', "links[0]", "unknown link technology 'nvlink9'"),
        ("count = 18", "count = 0", "links[0]", "count"),
        ("count = 18", "count = -2", "links[0]", "greater than 0"),
        ("count = 18", 'count = "many"', "links[0]", "count"),
        ("bandwidth_gb_per_s = 25.0", "bandwidth_gb_per_s = 0.0", "links[0]", "bandwidth_gb_per_s"),
        (
            "bandwidth_gb_per_s = 25.0",
            "bandwidth_gb_per_s = -5.0",
            "links[0]",
            "bandwidth_gb_per_s",
        ),
        ('b = "g1"', 'b = "gpu7"', "links[0]", "'gpu7' is not a defined device"),
        ('id = "g1"', 'id = "g0"', "g0", "duplicate device id"),
        ("count = 18", "count = 19", "g0", "18 links, this device uses 19"),
        ("count = 18", "count = 18\ncolour = 1", "links[0]", "unknown key 'colour'"),
        ('a = "g0"\n', "", "links[0]", "missing key 'a'"),
        ('type = "H100"\nnode = 1', 'type = "H100"\nnode = -1', "devices[1] (g1)", "node"),
    ],
)
def test_bad_input_names_entry_and_rule(
    tmp_path: Path, old: str, new: str, entry: str, words: str
) -> None:
    assert old in GOOD
    error = _error(tmp_path, GOOD.replace(old, new, 1))
    assert error.entry == entry
    assert words in error.message


def test_unconnected_accelerator(tmp_path: Path) -> None:
    text = GOOD.replace("[[links]]", '[[devices]]\nid = "g2"\ntype = "H100"\n\n[[links]]')
    error = _error(tmp_path, text)
    assert error.entry == "g2"
    assert "not connected to 'g0'" in error.message


def test_no_eval_no_pickle() -> None:
    source = (Path(__file__).resolve().parents[2] / "src/scaleup/topology/io.py").read_text()
    assert "eval(" not in source
    assert "pickle" not in source.replace("No eval, no\npickle", "")
