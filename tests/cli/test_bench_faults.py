"""``--fail-link`` and ``--degrade`` on ``scaleup bench``, ``plan`` and ``compare`` (typer's
runner): damaged fabrics in the table, hand-worked busbw, and one-line errors (exit 2)."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from scaleup.cli import app

runner = CliRunner()


def _bench(*args: str) -> list[dict]:
    result = runner.invoke(app, ["bench", "-b", "4G", "-e", "4G", "--json", *args])
    assert result.exit_code == 0, result.output
    return json.loads(result.output)


def test_the_table_names_the_damaged_fabric():
    result = runner.invoke(
        app, ["bench", "--topology", "dgx1-v100", "-b", "1M", "-e", "1M", "--fail-link", "g0-g1"]
    )
    assert result.exit_code == 0, result.output
    assert "dgx1-v100+fail(g0-g1)" in result.output


@pytest.mark.parametrize(
    ("flags", "rings"),
    [((), 6), (("--fail-link", "g0-g1"), 4), (("--degrade", "g0-g1=0.5"), 5)],
)
def test_ring_channels_follow_the_damaged_fabric(flags, rings):
    """dgx1-v100, ring/simple at 4 GiB: 6 NVLink2 links per GPU at 25 GB/s give 6 rings; with
    g0-g1 (a doubled pair) failed g0 keeps 4 links, so 4 rings; degraded to half, the pair
    carries one ring's 25 GB/s, so 5. The busbw follows the ring count (less the latency). The
    least simulated time (``--select fastest``) takes the searched count; NCCL runs twice its
    searched channels (``comm->nChannels``, connect.cc line 460), and so does the default."""
    args = ("--topology", "dgx1-v100", "--algo", "ring", "--proto", "simple", *flags)
    rows = _bench(*args, "--select", "fastest")
    assert rows[0]["channels"] == rings
    assert rows[0]["topology"].startswith("dgx1-v100")
    assert _bench(*args)[0]["channels"] == 2 * rings


def test_halving_a_gpus_links_slows_the_tuned_all_reduce():
    d = [f"--degrade=g0-sw{k}=0.5" for k in range(4)]
    intact = _bench()[0]
    damaged = _bench(*d)[0]
    assert damaged["topology"] == "dgx-h100+" + "+".join(f"degrade(g0-sw{k}=0.5)" for k in range(4))
    assert damaged["time_us"] >= 1.5 * intact["time_us"]


def test_degrade_one_prints_the_same_numbers():
    intact = _bench("--topology", "mi300x-8")[0]
    same = _bench("--topology", "mi300x-8", "--degrade", "g0-g1=1")[0]
    assert same["time_us"] == intact["time_us"]
    assert same["busbw_gb_per_s"] == intact["busbw_gb_per_s"]


@pytest.mark.parametrize(
    ("args", "flag", "words"),
    [
        (["--fail-link", "g0-g9"], "--fail-link", "no device 'g9'"),
        (["--fail-link", "g0-g1"], "--fail-link", "no link between g0 and g1"),  # via switches
        (["--fail-link", "g0"], "--fail-link", "two device ids"),
        (["--degrade", "g0-sw0"], "--degrade", "A-B=F"),
        (["--degrade", "g0-sw0=0"], "--degrade", "(0, 1]"),
        (["--degrade", "g0-sw0=1.01"], "--degrade", "(0, 1]"),
        (["--degrade", "g0-sw0=half"], "--degrade", "not a number"),
        (
            [f"--fail-link=g0-sw{k}" for k in range(4)],
            "--fail-link",
            "off from the other accelerators",
        ),
        (["--runtime", "shm", "-g", "2", "--fail-link", "g0-sw0"], "--fail-link", "simulator"),
        (["--runtime", "shm", "-g", "2", "--degrade", "g0-sw0=0.5"], "--degrade", "simulator"),
    ],
)
def test_bad_faults_exit_2_with_one_line(args, flag, words):
    result = runner.invoke(app, ["bench", "-b", "1K", "-e", "1K", *args])
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output
    assert len(result.output.strip().splitlines()) == 1
    assert result.output.startswith(f"error: {flag}:"), result.output
    assert words in result.output


def test_nvls_on_a_switch_a_gpu_lost_is_one_line():
    result = runner.invoke(
        app, ["bench", "-b", "1M", "-e", "1M", "--algo", "nvls", "--fail-link", "g3-sw1"]
    )
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output
    assert len(result.output.strip().splitlines()) == 1


def test_plan_takes_the_flags():
    args = ["plan", "-m", "llama-3-8b", "--tp", "8", "--json"]
    intact = json.loads(runner.invoke(app, args).output)
    result = runner.invoke(app, [*args, "--degrade", "g0-sw0=0.25"])
    assert result.exit_code == 0, result.output
    damaged = json.loads(result.output)
    assert "degrade(g0-sw0=0.25)" in json.dumps(damaged)
    assert damaged["step_time_s"] > intact["step_time_s"]
    bad = runner.invoke(app, [*args, "--fail-link", "g0-nope"])
    assert bad.exit_code == 2
    assert bad.output.startswith("error: --fail-link:")


def test_compare_takes_the_flags():
    result = runner.invoke(
        app,
        ["compare", "dgx-h100", "--sizes", "1M", "--tp", "8", "--json", "--fail-link", "g0-sw0"],
    )
    assert result.exit_code == 0, result.output
    rows = json.loads(result.output)
    assert rows[0]["topology"] == "dgx-h100+fail(g0-sw0)"
