"""NCCL's buffer and chunk sizes (tune/nccl_buffers.py) and what aws-ofi-nccl sets on AWS
(tune/ofi_env.py): the steps the tuner's pipelines move, the user's values over the plugin's."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from scaleup.cli import app
from scaleup.errors import UsageError
from scaleup.topology import resolve_topology
from scaleup.tune import BenchRequest, TuneSession
from scaleup.tune.nccl_buffers import NCCL_BUFFER_VARS, NcclBuffers, read_nccl_buffers
from scaleup.tune.nccl_env import read_nccl_env
from scaleup.tune.ofi_env import P4D, P5, PLATFORM_BUFFERS, ofi_platform, plugin_buffers
from scaleup.tune.p2p_rule import P2pRule
from scaleup.tune.question import Question
from scaleup.tune.rules import Candidate

P5_X4 = "4xdgx-h100:nic=efa-400g"
KEY = ("all_reduce", None, "float32", "sum", 0)


@pytest.fixture(scope="module")
def p5_x4():
    return resolve_topology(P5_X4)


@pytest.mark.parametrize(
    ("preset", "platform"),
    [
        ("2xdgx-h100:nic=efa-400g", P5),
        ("2xdgx-h100:gpu=H200,nic=efa-400g", P5),  # p5e
        ("2xdgx-a100:nic=efa-100g,nics=4", P4D),
        ("2xdgx-h100", None),  # InfiniBand: no EFA plugin
        ("2xdgx-h100:nic=efa-100g", None),  # H100 behind p4d's EFA: no such instance
        ("2xdgx-a100:nic=efa-400g", None),
        ("dgx-h100", None),
    ],
)
def test_platform_is_the_accelerators_and_their_efa(preset, platform):
    assert ofi_platform(resolve_topology(preset)) == platform


def test_one_node_of_a_p5_pair_is_p5_too():
    """The plugin loads, and sets its variables, on one node as well (NCCL initialises the
    network for every communicator)."""
    assert ofi_platform(resolve_topology("2xdgx-h100:nic=efa-400g"), range(8)) == P5


def test_plugin_sets_the_sizes_of_its_platform_table():
    # aws-ofi-nccl v1.16.3 src/platform-aws.cpp lines 85-86, 99-100, 157-160
    assert PLATFORM_BUFFERS[P5].applied() == {
        "NCCL_BUFFSIZE": "8388608",
        "NCCL_P2P_NET_CHUNKSIZE": "524288",
        "NCCL_NVLS_CHUNKSIZE": "524288",
        "NCCL_NVLSTREE_MAX_CHUNKSIZE": "524288",
    }
    assert PLATFORM_BUFFERS[P4D].applied() == {
        "NCCL_BUFFSIZE": "8388608",
        "NCCL_P2P_NET_CHUNKSIZE": "524288",
    }
    assert plugin_buffers(resolve_topology("2xdgx-h100")) == NcclBuffers()


def test_nvls_tree_chunk_on_p5_is_the_plugins_worked_by_hand(p5_x4):
    """Four p5 nodes: NCCL alone cuts NVLS-Tree to 64 KiB from four nodes on; the plugin's
    512 KiB stands at 8 GiB (concurrent ops 16 channels x 8 heads = 128: 8 GiB >= 32 x 128 x
    512 KiB = 2 GiB); at 1 GiB it halves once (1 GiB < 2 GiB, >= 16 x 128 x 256 KiB = 512 MiB)."""
    question = Question(TuneSession(), p5_x4, KEY)
    cand = Candidate("nvls_tree", "simple", 16)
    assert question.step_bytes(cand, 8 << 30) == 512 * 1024
    assert question.step_bytes(cand, 1 << 30) == 256 * 1024
    ib = Question(TuneSession(), resolve_topology("4xdgx-h100"), KEY)
    assert ib.step_bytes(cand, 8 << 30) == 64 * 1024
    user = Question(TuneSession(), p5_x4, KEY, buffers=NcclBuffers(nvls_tree_max_chunk_bytes=65536))
    assert user.step_bytes(cand, 8 << 30) == 64 * 1024


def test_simple_pipelines_step_one_slot_of_the_buffer(p5_x4):
    """NCCL_BUFFSIZE 8 MiB: a tree Simple step is 8 MiB / NCCL_STEPS = 1 MiB; 512 KiB off AWS."""
    cand = Candidate("tree", "simple", 16)
    assert Question(TuneSession(), p5_x4, KEY).step_bytes(cand, 1 << 30) == 1 << 20
    ib = Question(TuneSession(), resolve_topology("4xdgx-h100"), KEY)
    assert ib.step_bytes(cand, 1 << 30) == 1 << 19
    # fewer, larger chunks where the step is larger (the pipeline depth follows the slot)
    small = Question(TuneSession(), p5_x4, KEY, buffers=NcclBuffers(buffsize_bytes=1 << 20))
    assert small.chunks(cand, 64 << 20) > Question(TuneSession(), p5_x4, KEY).chunks(cand, 64 << 20)


def test_p2p_chunk_is_the_plugins_capped_by_the_slot(p5_x4):
    assert P2pRule.of(p5_x4, None, plugin_buffers(p5_x4)).chunk_bytes == 512 * 1024
    assert P2pRule.of(resolve_topology("4xdgx-h100")).chunk_bytes == 128 * 1024
    # init.cc line 721: at most one Simple slot (2 MiB / 8 = 256 KiB)
    capped = NcclBuffers(buffsize_bytes=2 << 20).over(plugin_buffers(p5_x4))
    assert P2pRule.of(p5_x4, None, capped).chunk_bytes == 256 * 1024


def test_larger_nvls_tree_chunk_fills_the_pipeline_longer():
    """The plugin's 512 KiB chunk against NCCL's own 64 KiB on four p5 nodes: the same
    algorithm and rate, a longer fill (each hop holds a chunk 8x as large), so never faster;
    the tuner's lower bound stays under the simulated time."""
    topo = resolve_topology(P5_X4)
    session = TuneSession()
    timed = {}
    nccl_alone = NcclBuffers(4 << 20, 128 << 10, nvls_chunk_bytes=128 << 10,
                             nvls_tree_max_chunk_bytes=64 << 10)  # fmt: skip
    for label, buffers in (("plugin", NcclBuffers()), ("nccl", nccl_alone)):
        request = BenchRequest(sizes_bytes=(256 << 20,), algorithm="nvls_tree", buffers=buffers)
        timed[label] = session.sweep(topo, request)[0].time_s
    assert timed["plugin"] > timed["nccl"]
    question = Question(TuneSession(), topo, KEY)
    cand = Candidate("nvls_tree", "simple", 16)
    count = (256 << 20) // 4
    assert question.lower_bound_s(cand, count) <= timed["plugin"]


def test_user_variables_are_read_and_checked():
    env = read_nccl_env({"NCCL_BUFFSIZE": "2097152", "NCCL_NVLS_CHUNKSIZE": "65536"})
    assert env.buffers == NcclBuffers(buffsize_bytes=2097152, nvls_chunk_bytes=65536)
    assert env.applied == {"NCCL_BUFFSIZE": "2097152", "NCCL_NVLS_CHUNKSIZE": "65536"}
    for var, value in (
        ("NCCL_BUFFSIZE", "8M"),
        ("NCCL_BUFFSIZE", "1000004"),  # not a multiple of NCCL_STEPS
        ("NCCL_P2P_NET_CHUNKSIZE", "0"),
        ("NCCL_NVLS_CHUNKSIZE", "512"),
        ("NCCL_NVLSTREE_MAX_CHUNKSIZE", str(1 << 31)),
    ):
        with pytest.raises(UsageError) as info:
            read_nccl_env({var: value})
        assert info.value.source == var


def test_bench_request_refuses_a_non_buffers_value():
    with pytest.raises(UsageError) as info:
        BenchRequest(buffers={"NCCL_BUFFSIZE": 1})  # type: ignore[arg-type]
    assert info.value.source == "buffers"


sizes = st.one_of(st.none(), st.integers(1024, 1 << 30))


@settings(max_examples=60, deadline=None)
@given(
    mine=st.builds(NcclBuffers, sizes, sizes, sizes, sizes),
    base=st.builds(NcclBuffers, sizes, sizes, sizes, sizes),
)
def test_the_users_value_wins_field_by_field(mine, base):
    merged = mine.over(base)
    for name in NCCL_BUFFER_VARS.values():
        expected = getattr(mine, name) if getattr(mine, name) is not None else getattr(base, name)
        assert getattr(merged, name) == expected


@settings(max_examples=60, deadline=None)
@given(st.integers(128, 1 << 27).map(lambda k: k * 8))
def test_buffer_round_trips_and_slot_is_an_eighth(nbytes):
    buffers = read_nccl_buffers({"NCCL_BUFFSIZE": str(nbytes)})
    assert buffers.simple_step_bytes * 8 == nbytes
    assert read_nccl_buffers(buffers.applied()) == buffers


runner = CliRunner()
_P5_BENCH = ["bench", "--topology", "2xdgx-h100:nic=efa-400g", "-b", "1G", "-e", "1G"]


def test_cli_names_the_plugins_sizes_and_the_users_take_precedence():
    result = runner.invoke(app, _P5_BENCH)
    assert result.exit_code == 0, result.output
    line = "# Network plugin: aws-ofi-nccl (p5/p5e) sets NCCL_BUFFSIZE=8388608 "
    assert line in result.output
    user = runner.invoke(app, _P5_BENCH, env={"NCCL_NVLS_CHUNKSIZE": "131072"})
    assert user.exit_code == 0, user.output
    assert "NCCL_NVLS_CHUNKSIZE=524288" not in user.output
    assert "# NCCL environment applied: NCCL_NVLS_CHUNKSIZE=131072" in user.output
    off_aws = runner.invoke(app, ["bench", "--topology", "2xdgx-h100", "-b", "1G", "-e", "1G"])
    assert "Network plugin" not in off_aws.output


def test_cli_json_rows_carry_the_plugins_sizes_only_on_efa():
    rows = json.loads(runner.invoke(app, [*_P5_BENCH, "--json"]).output)
    assert rows[0]["net_plugin_env"]["NCCL_NVLSTREE_MAX_CHUNKSIZE"] == "524288"
    user = runner.invoke(app, [*_P5_BENCH, "--json"], env={"NCCL_BUFFSIZE": "4194304"})
    row = json.loads(user.output)[0]
    assert "NCCL_BUFFSIZE" not in row["net_plugin_env"]
    assert row["nccl_env"] == {"NCCL_BUFFSIZE": "4194304"}
    plain = json.loads(runner.invoke(app, ["bench", "-b", "1M", "-e", "1M", "--json"]).output)
    assert "net_plugin_env" not in plain[0]


def test_cli_bad_size_is_one_line_exit_2():
    result = runner.invoke(app, _P5_BENCH, env={"NCCL_BUFFSIZE": "lots"})
    assert result.exit_code == 2, result.output
    lines = [ln for ln in result.output.splitlines() if ln.strip()]
    assert len(lines) == 1, result.output
    assert "NCCL_BUFFSIZE" in lines[0]
    assert "Traceback" not in result.output
