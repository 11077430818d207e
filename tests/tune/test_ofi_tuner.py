"""aws-ofi-nccl's region tuner (scaleup.tune.ofi_tuner): the regions read as the plugin reads them,
where it applies, and what it makes ``scaleup bench`` run."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st
from typer.testing import CliRunner

from scaleup.cli import app
from scaleup.topology import resolve_topology
from scaleup.tune import BenchRequest, TuneSession
from scaleup.tune.ofi_tuner import (
    P5_ALL_REDUCE,
    TUNER_MAX_RANKS,
    TUNER_MAX_SIZE,
    OfiRegionTuner,
    extend_region,
    in_region,
)

MIB = 1 << 20
GIB = 1 << 30
_ALL = {(a, p) for a in ("ring", "tree", "nvls_tree") for p in ("ll", "ll128", "simple")} - {
    ("nvls_tree", "ll"),
    ("nvls_tree", "ll128"),
}


def _tuner(nodes: int) -> OfiRegionTuner:
    tuner = OfiRegionTuner.of(resolve_topology(f"{nodes}xdgx-h100:nic=efa-400g"))
    assert tuner is not None
    return tuner


def test_extend_region_runs_an_edge_to_the_far_corner():
    # slope 32 ranks per 1.5 GiB through the origin: at 100 GiB, 2133.3 ranks (< 2^20)
    x, y = extend_region((8053063680, 160), (9663676416, 192), (TUNER_MAX_SIZE, TUNER_MAX_RANKS))
    assert x == TUNER_MAX_SIZE
    assert y == pytest.approx(100 * 1024 * 32 / 1536)
    assert extend_region((1, 5), (1, 9), (50, 70)) == (1, 70)  # vertical
    assert extend_region((1, 5), (3, 5), (50, 70)) == (50, 5)  # horizontal


@given(
    st.integers(-5, 15), st.integers(-5, 15), st.integers(0, 4), st.integers(0, 4),
    st.integers(1, 6), st.integers(1, 6),
)  # fmt: skip
def test_in_region_on_a_rectangle_is_the_closed_box(px, py, x0, y0, w, h):
    box = ((x0, y0), (x0 + w, y0), (x0 + w, y0 + h), (x0, y0 + h))
    expected = x0 <= px <= x0 + w and y0 <= py <= y0 + h
    assert in_region((px, py), box) is expected
    assert in_region((px, py), box[::-1]) is expected


def test_a_degenerate_region_holds_the_points_on_it():
    segment = ((2, 16), (10, 16), (2, 16))
    assert in_region((5, 16), segment)
    assert not in_region((5, 17), segment)


@pytest.mark.parametrize(
    ("nodes", "nbytes", "pick"),
    [
        # 32 ranks: tree LL128 to the vertex (36 MiB, 32), ring LL128 to its edge from (1 GiB,
        # 17) to (2 GiB, 64), which crosses 32 ranks at 1 GiB x (1 + 15/47) = 1350.8 MiB; ring
        # Simple from its vertex (1.5 GiB, 32); between the two no region: NCCL's model.
        (4, 36 * MIB, ("tree", "ll128")),
        (4, 36 * MIB + 1, ("ring", "ll128")),
        (4, 1350 * MIB, ("ring", "ll128")),
        (4, 1351 * MIB, None),
        (4, 1536 * MIB, ("ring", "simple")),
        (4, 8 * GIB, ("ring", "simple")),
        # 64 ranks: tree LL128 to (112 MiB, 64); ring LL128 to (2 GiB, 64); ring Simple from
        # (2.5 GiB, 64)
        (8, 112 * MIB, ("tree", "ll128")),
        (8, 2 * GIB, ("ring", "ll128")),
        (8, 2 * GIB + 1, None),
        (8, 2560 * MIB, ("ring", "simple")),
        # 128 ranks: the vertex (2 GiB, 128) is on ring LL128's edge and NVLS-Tree's: the first
        # region in order wins; NVLS-Tree to (6 GiB, 128), then ring Simple
        (16, 288 * MIB, ("tree", "ll128")),
        (16, 2 * GIB, ("ring", "ll128")),
        (16, 4 * GIB, ("nvls_tree", "simple")),
        (16, 8 * GIB, ("ring", "simple")),
    ],
)
def test_p5_picks_worked_from_the_vertices(nodes, nbytes, pick):
    assert _tuner(nodes).pick("all_reduce", nbytes, _ALL) == pick


def test_a_pair_nccl_rules_out_is_skipped_for_the_next_region():
    tuner = _tuner(16)
    assert tuner.pick("all_reduce", 2 * GIB, _ALL - {("ring", "ll128")}) == ("nvls_tree", "simple")
    assert tuner.pick("all_reduce", GIB, _ALL - {("ring", "ll128")}) is None
    assert tuner.pick("all_gather", GIB, _ALL) is None  # no all_gather regions at 8 a node


@pytest.mark.parametrize(
    "spec",
    [
        "2xdgx-h100:nic=efa-400g",  # two nodes: the plugin leaves it to NCCL
        "4xdgx-h100:nic=ib-ndr",  # not EFA
        "4xdgx-a100:nic=efa-100g,nics=4",  # p4d: no regions
        "4xdgx-h100:gpu=H800,nic=efa-400g",  # not a p5 part
    ],
)
def test_no_regions_off_p5_or_on_two_nodes(spec):
    assert OfiRegionTuner.of(resolve_topology(spec)) is None


def test_no_regions_unless_eight_ranks_a_node():
    topology = resolve_topology("4xdgx-h100:nic=efa-400g")
    assert OfiRegionTuner.of(topology, list(range(24))) is not None  # three whole nodes
    assert OfiRegionTuner.of(topology, [*range(8), *range(8, 12), *range(16, 28)]) is None
    p5e = resolve_topology("4xdgx-h100:gpu=H200,nic=efa-400g")  # p5e: H200, the same regions
    assert OfiRegionTuner.of(p5e) is not None


def test_the_regions_are_in_the_plugins_order():
    assert [(r.algorithm, r.protocol) for r in P5_ALL_REDUCE] == [
        ("tree", "ll128"),
        ("nvls_tree", "simple"),
        ("ring", "ll128"),
        ("nvls_tree", "simple"),
        ("ring", "simple"),
    ]


def _pick(spec: str, nbytes: int, **kw: object) -> tuple[str, str, str]:
    request = BenchRequest(sizes_bytes=(nbytes,), **kw)
    choice = TuneSession().sweep(resolve_topology(spec), request)[0]
    return choice.algorithm, choice.protocol, choice.plugin


def test_bench_runs_the_plugins_pick_and_none_turns_it_off():
    spec = "4xdgx-h100:nic=efa-400g"
    assert _pick(spec, GIB) == ("ring", "ll128", "aws-ofi-nccl region tuner")
    algo, proto, plugin = _pick(spec, GIB, net_tuner=False)
    assert (algo, proto, plugin) == ("nvls_tree", "simple", "")  # NCCL's model's least
    assert _pick(spec, GIB, selection="fastest")[2] == ""  # the plugin moves nccl-model only


def test_cli_explains_the_plugins_pick_and_reads_its_variables():
    runner = CliRunner()
    args = ["bench", "--topology", "4xdgx-h100:nic=efa-400g", "-b", "1G", "-e", "1G"]
    result = runner.invoke(app, [*args, "--explain"])
    assert result.exit_code == 0, result.output
    assert "picked by the aws-ofi-nccl region tuner" in result.output
    assert "# Tuner plugin: aws-ofi-nccl's region tuner (p5)" in result.output
    record = json.loads(runner.invoke(app, [*args, "--explain", "--json"]).output)
    assert "aws-ofi-nccl region tuner" in json.dumps(record)
    off = runner.invoke(app, args, env={"NCCL_TUNER_PLUGIN": "none"})
    assert off.exit_code == 0, off.output
    assert "nvls_tree" in off.output
    assert "Tuner plugin" not in off.output
    bad = runner.invoke(app, args, env={"OFI_NCCL_TUNER_TYPE": "Model"})
    assert bad.exit_code == 2
    assert "OFI_NCCL_TUNER_TYPE" in bad.output
    assert "Traceback" not in bad.output
