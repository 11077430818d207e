"""Sweep specs: expansion, stable ids, one-line errors naming file, entry and rule."""

from __future__ import annotations

from pathlib import Path

import pytest

from scaleup.errors import SpecFileError
from scaleup.sweep import expand_spec, load_spec, load_spec_text, point_id, size_range

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def test_small_example_expands_to_the_cross_product() -> None:
    spec, base = load_spec(EXAMPLES / "sweep-small.toml")
    points = expand_spec(spec, base=base)
    assert len(points) == 2 * 2 * 3
    assert {p["bytes"] for p in points} == {1024, 32 * 1024, 1024 * 1024}
    assert len({point_id(p) for p in points}) == len(points)
    again = expand_spec(load_spec(EXAMPLES / "sweep-small.toml")[0], base=base)
    assert [point_id(p) for p in again] == [point_id(p) for p in points]


def test_full_example_is_valid() -> None:
    spec, base = load_spec(EXAMPLES / "sweep.toml")
    points = expand_spec(spec, base=base, check_topologies=False)
    kinds = {p["kind"] for p in points}
    assert kinds == {"bench", "plan"}
    assert any(p["topology"] == "2xdgx-h100" for p in points)


def test_point_id_ignores_key_order_and_sees_values() -> None:
    a = {"kind": "bench", "topology": "dgx-h100", "bytes": 8}
    assert point_id(a) == point_id(dict(reversed(list(a.items()))))
    assert point_id(a) != point_id({**a, "bytes": 16})


def test_nodes_and_files_and_grid(tmp_path: Path, registered_fakes: object) -> None:
    (tmp_path / "spec.toml").write_text(
        """
[[bench]]
topologies = ["dgx-h100"]
nodes = [1, 2]
collectives = ["broadcast"]
sizes = ["1K", 4096]
algorithms = ["ring", "tuned"]

[[grid]]
kind = "square"
params = { x = [1, 2, 3], tag = "fixed" }
"""
    )
    spec, base = load_spec(tmp_path / "spec.toml")
    points = expand_spec(spec, base=base)
    bench = [p for p in points if p["kind"] == "bench"]
    assert {p["topology"] for p in bench} == {"dgx-h100", "2xdgx-h100"}
    assert len(bench) == 2 * 2 * 2
    assert [p for p in points if p["kind"] == "square"] == [
        {"kind": "square", "x": x, "tag": "fixed"} for x in (1, 2, 3)
    ]


def test_size_range_is_inclusive_and_rounds() -> None:
    assert size_range(8, 1024, 4) == [8, 32, 128, 512]
    assert size_range(1024, 1024, 2) == [1024]
    assert size_range(0, 4, 2) == [0, 1, 2, 4]


def _expand(path: Path) -> list[dict[str, object]]:
    spec, base = load_spec(path)
    return expand_spec(spec, base=base, source=str(path))


BASE = '[[bench]]\ntopologies = ["dgx-h100"]\ncollectives = ["all_reduce"]\nsizes = ["1M"]\n'


@pytest.mark.parametrize(
    ("text", "entry", "rule"),
    [
        ("[[bench]\n", None, "not valid TOML"),
        ("name = 'x'\n", None, "nothing to sweep"),
        (
            BASE.replace("all_reduce", "allreduce"),
            "bench[0].collectives",
            "did you mean all_reduce",
        ),
        (BASE + "protocols = ['fast']\n", "bench[0].protocols", "unknown protocol 'fast'"),
        (BASE + "colour = 'red'\n", "bench[0].colour", "Extra inputs"),
        (BASE + "nodes = [0]\n", "bench[0].nodes", "nodes must be >= 1"),
        (BASE + "dtype = 'float33'\n", "bench[0].dtype", "unknown dtype"),
        (BASE.replace('["1M"]', '["1Q"]'), "bench[0].sizes", "not a size"),
        (BASE.replace('["1M"]', '{ min = "1M", max = "1K" }'), "bench[0].sizes", "max"),
        (
            BASE.replace('["1M"]', '{ min = "1K", max = "1M", factor = 1 }'),
            "bench[0].sizes.factor",
            "greater than 1",
        ),
        (BASE.replace("dgx-h100", "dgx-h1000"), "bench[0].topologies", "no preset named"),
        (BASE.replace("dgx-h100", "missing.toml"), "bench[0].topologies[0]", "missing.toml"),
        ("[[plan]]\ntopologies = ['dgx-h100']\n", "plan[0].models", "Field required"),
    ],
)
def test_spec_errors_name_file_entry_and_rule(
    tmp_path: Path, text: str, entry: str | None, rule: str
) -> None:
    path = tmp_path / "bad.toml"
    path.write_text(text)
    with pytest.raises(SpecFileError) as caught:
        _expand(path)
    error = caught.value
    line = error.one_line()
    assert "\n" not in line
    assert line.startswith(str(path))
    assert error.entry == entry
    assert rule in line


def test_missing_spec_file_is_a_spec_error(tmp_path: Path) -> None:
    with pytest.raises(SpecFileError, match="cannot read"):
        load_spec(tmp_path / "nope.toml")


def test_text_loader_names_its_source() -> None:
    with pytest.raises(SpecFileError, match="^inline: "):
        load_spec_text("x = 1", source="inline")


def test_a_block_profile_reaches_every_point_and_its_timing(tmp_path: Path) -> None:
    """``profile = FILE`` embeds the calibration in the block's points (hidden text, visible
    name; a new point id) and the bench kind applies it: a 20 us launch latency adds 20 us."""
    from scaleup.sweep.kinds import bench_point

    (tmp_path / "h100.toml").write_text(
        '[profile]\ntopology = "dgx-h100"\nlaunch_latency_us = 20.0\n'
    )
    block = '[[bench]]\ntopologies = ["dgx-h100"]\ncollectives = ["all_reduce"]\nsizes = [8]\n'
    (tmp_path / "plain.toml").write_text(block)
    (tmp_path / "fitted.toml").write_text(block + 'profile = "h100.toml"\n')
    plain = expand_spec(load_spec(tmp_path / "plain.toml")[0], base=tmp_path)
    fitted = expand_spec(load_spec(tmp_path / "fitted.toml")[0], base=tmp_path)
    assert [p["profile"] for p in fitted] == ["h100.toml"]
    assert "launch_latency_us" in fitted[0]["profile_text"]
    assert point_id(plain[0]) != point_id(fitted[0])
    before, after = bench_point(plain[0]), bench_point(fitted[0])
    assert after["time_us"] - before["time_us"] == pytest.approx(20.0, abs=1e-6)


@pytest.mark.parametrize(
    ("profile_text", "rule"),
    [
        (None, "No such file"),
        ('[profile]\ntopology = "x"\nlink_efficiency = 7\n', "link_efficiency"),
    ],
)
def test_a_bad_block_profile_is_a_spec_error(
    tmp_path: Path, profile_text: str | None, rule: str
) -> None:
    if profile_text is not None:
        (tmp_path / "p.toml").write_text(profile_text)
    (tmp_path / "spec.toml").write_text(
        '[[bench]]\ntopologies = ["dgx-h100"]\ncollectives = ["all_reduce"]\nsizes = [8]\n'
        'profile = "p.toml"\n'
    )
    spec, base = load_spec(tmp_path / "spec.toml")
    with pytest.raises(SpecFileError) as caught:
        expand_spec(spec, base=base)
    assert "bench[0].profile" in caught.value.one_line()
    assert rule in caught.value.one_line()
