"""``scaleup bench`` through typer's runner: tables on every preset, flags, JSON/CSV/plot,
errors."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from scaleup.cli import app
from scaleup.topology import list_presets

runner = CliRunner()


def _run(*args: str):
    return runner.invoke(app, ["bench", *args])


def _data_lines(output: str) -> list[str]:
    return [line for line in output.splitlines() if line.strip() and not line.startswith("#")]


@pytest.mark.parametrize("preset", sorted(list_presets()))
def test_every_preset_prints_a_full_table(preset):
    result = _run("--topology", preset, "-b", "8", "-e", "64K")  # every accelerator of the preset
    assert result.exit_code == 0, result.output
    lines = _data_lines(result.output)
    assert len(lines) == 14  # 8 B .. 64 KiB, -f 2
    assert "# Avg bus bandwidth" in result.output
    assert "busbw" in result.output
    assert "linkbw" in result.output


def test_default_is_the_quickstart_table():
    result = _run()
    assert result.exit_code == 0, result.output
    lines = _data_lines(result.output)
    assert len(lines) == 31  # all_reduce_perf -b 8 -e 8G -f 2
    assert lines[0].split()[0] == "8"
    assert lines[-1].split()[0] == str(8 * 1024**3)
    assert "# Topology dgx-h100" in result.output
    assert "nvls" in lines[-1]


@pytest.mark.parametrize(
    "args",
    [
        ["--op", "all_sum"],
        ["-b", "1M", "-e", "8"],
        ["--topology", "no-such-machine"],
        ["-f", "1"],
        ["-b", "eight"],
        ["--proto", "fast"],
        ["--ranks", "99"],
        ["-o", "mulsum"],
        ["-o", "max", "--op", "min"],
        ["--runtime", "tcp", "-g", "2"],
        ["--runtime", "shm"],
        ["-n", "0"],
        ["-w", "-1"],
        ["-c", "2"],
        ["--collective", "all_sum_perf"],
        ["--op", "all_gather", "--collective", "reduce"],
    ],
)
def test_bad_flags_exit_2_with_one_line(args):
    result = _run(*args)
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output
    assert len(result.output.strip().splitlines()) == 1
    assert result.output.startswith("error:")


def test_json_rows():
    result = _run("-e", "1M", "-b", "1K", "--json")
    assert result.exit_code == 0, result.output
    rows = json.loads(result.output)
    assert len(rows) == 11
    for row in rows:
        for key in ("bytes", "time_us", "algbw_gb_per_s", "busbw_gb_per_s", "algo", "proto"):
            assert key in row


def test_csv_rows():
    result = _run("-e", "64K", "-b", "1K", "--csv", "--op", "all_gather")
    assert result.exit_code == 0, result.output
    lines = result.output.strip().splitlines()
    assert lines[0].startswith("topology,collective,bytes")
    assert len(lines) == 1 + 7


def test_plot_writes_png(tmp_path):
    out = tmp_path / "busbw.png"
    result = _run("-e", "1M", "--topology", "dgx-h100,mi300x-8", "--plot", str(out))
    assert result.exit_code == 0, result.output
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_compare_topologies_in_one_table():
    result = _run("-b", "1M", "-e", "16M", "--topology", "dgx-h100,pcie-8")
    assert result.exit_code == 0, result.output
    header = [
        line
        for line in result.output.splitlines()
        if line.startswith("#") and "dgx-h100" in line and "pcie-8" in line
    ]
    assert header, result.output
    lines = _data_lines(result.output)
    assert len(lines) == 5
    assert result.output.count("# Avg bus bandwidth") == 2


def test_no_p2p_is_slower_on_pcie8_inside_a_socket():
    def time_us(*extra: str) -> float:
        result = _run(
            "--topology", "pcie-8", "--ranks", "4", "-b", "64M", "-e", "64M", "--json", *extra
        )
        assert result.exit_code == 0, result.output
        return json.loads(result.output)[0]["time_us"]

    assert time_us("--no-p2p") > time_us()


def test_ranks_algo_proto_flags():
    result = _run(
        "-b", "1M", "-e", "1M", "--ranks", "4", "--algo", "ring", "--proto", "simple", "--json"
    )
    assert result.exit_code == 0, result.output
    row = json.loads(result.output)[0]
    assert (row["nranks"], row["algo"], row["proto"]) == (4, "ring", "simple")


@pytest.mark.parametrize(
    "counts",
    [("-g", "2", "-n", "2", "-w", "1"), ("--nprocs", "2", "--iters", "2", "--warmup", "1")],
)
def test_runtime_dispatch(counts):
    """nccl-tests' -g/-n/-w, and scaleup's old --nprocs/--iters/--warmup, mean the same."""
    result = _run("--runtime", "shm", *counts, "-b", "1K", "-e", "4K", "--json")
    if result.exit_code == 2 and "runtime measurement not available" in result.output:
        pytest.skip("the runtime stream's measurer is not installed")
    assert result.exit_code == 0, result.output
    rows = json.loads(result.output)
    assert [r["bytes"] for r in rows] == [1024, 2048, 4096]


def test_runtime_reports_the_redop_and_root_asked_for():
    """``--runtime shm -o max`` used to report ``redop sum`` (the runtime path dropped -o, -r)."""
    result = _run(
        "--runtime", "shm", "-g", "2", "--op", "reduce", "-o", "max", "-r", "1",
        "-b", "1K", "-e", "1K", "-n", "1", "-w", "0", "--json",
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    row = json.loads(result.output)[0]
    assert (row["redop"], row["root"], row["runtime"], row["nranks"]) == ("max", 1, "shm", 2)


@pytest.mark.parametrize(
    ("flag", "args"),
    [
        ("--topology", ["--topology", "pcie-8"]),
        ("--proto", ["--proto", "ll"]),
        ("--channels", ["--channels", "2"]),
        ("--tuner", ["--tuner", "all"]),
        ("--no-p2p", ["--no-p2p"]),
        ("--exact", ["--exact"]),
    ],
)
def test_simulator_flags_are_refused_with_runtime(flag, args):
    result = _run("--runtime", "shm", "-g", "2", *args)
    assert result.exit_code == 2, result.output
    assert result.output.startswith(f"error: {flag}:")
    assert len(result.output.strip().splitlines()) == 1


@pytest.mark.parametrize(
    ("args", "flag"),
    [
        (["-o", "mulsum"], "-o"),
        (["-n", "0"], "-n"),
        (["-w", "-2"], "-w"),
        (["--proto", "fast"], "--proto"),
        (["--algo", "tree", "--op", "all_to_all"], "--algo"),
        (["--ranks", "99"], "-g"),
        (["-g", "99"], "-g"),
        (["--op", "broadcast", "-r", "8"], "-r"),
        (["--channels", "0"], "--channels"),
        (["--tuner", "mine"], "--tuner"),
        (["-b", "1M", "-e", "8"], "-b/-e"),
        (["--runtime", "shm", "-g", "2", "--op", "reduce", "-r", "2"], "-r"),
        # NCCL skips NVLS all_gather above 32 ranks per node (enqueue.cc): 72 on an NVL72 rack
        (
            [
                "--topology",
                "gb200-nvl72",
                "--op",
                "all_gather",
                "--algo",
                "nvls",
                "-b",
                "1M",
                "-e",
                "1M",
            ],
            "--algo",
        ),  # fmt: skip
    ],
)
def test_request_errors_name_the_flag(args, flag):
    result = _run(*args)
    assert result.exit_code == 2, result.output
    assert result.output.startswith(f"error: {flag}:"), result.output
