"""``fail_links`` and ``degrade`` in sweep blocks: every topology of the block damaged."""

from __future__ import annotations

import pytest

from scaleup.errors import SpecFileError
from scaleup.sweep import expand_spec, load_spec_text
from scaleup.sweep.kinds import bench_point, plan_point

_BLOCKS = """
name = "faults"
[[bench]]
topologies = ["dgx-h100"]
collectives = ["all_reduce"]
sizes = ["64M"]
{faults}
[[bench]]
topologies = ["dgx-h100"]
collectives = ["all_reduce"]
sizes = ["64M"]
[[plan]]
topologies = ["dgx-h100"]
models = ["llama-3-8b"]
tp = [8]
{faults}
"""


def _points(faults: str) -> list[dict]:
    spec = load_spec_text(_BLOCKS.format(faults=faults), source="f.toml")
    return expand_spec(spec, source="f.toml")


def test_block_faults_reach_the_points_and_the_topology():
    damaged, intact, planned = _points('fail_links = ["g0-sw2"]\ndegrade = ["g0-sw0=0.5"]')
    assert damaged["fail_links"] == "g0-sw2"
    assert damaged["degrade"] == "g0-sw0=0.5"
    assert "fail_links" not in intact  # a point without faults keeps its id
    slow, fast = bench_point(damaged), bench_point(intact)
    assert slow["topology_name"] == "dgx-h100+fail(g0-sw2)+degrade(g0-sw0=0.5)"
    assert slow["time_us"] > fast["time_us"]
    assert plan_point(planned)["step_time_s"] > 0


@pytest.mark.parametrize(
    ("faults", "words"),
    [
        ('degrade = ["g0-g9=0.5"]', "no device 'g9'"),
        ('degrade = ["g0sw0=0.5"]', "two device ids"),
        ('degrade = ["g0-sw0=2"]', "(0, 1]"),
        ('fail_links = ["g0-sw0;g1-sw0"]', "one link per entry"),
        ('fail_links = ["g0-g1"]', "no link between g0 and g1"),
    ],
)
def test_bad_block_faults_are_spec_errors(faults, words):
    with pytest.raises(SpecFileError) as info:
        _points(faults)
    assert info.value.source == "f.toml"
    assert words in info.value.message
