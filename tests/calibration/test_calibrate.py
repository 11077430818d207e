"""scaleup calibrate: known answers (synthetic logs from the simulator itself), a real log with
held-back sizes, log layouts (nccl-tests, rccl-tests, NCCL_DEBUG lines), profiles, bad input."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from scaleup.bench import bench_rows
from scaleup.calibrate import Pin, fit_profile, load_profile, parse_log, read_logs
from scaleup.cli.app import app
from scaleup.errors import LogFileError, ProfileFileError
from scaleup.topology import resolve_topology
from scaleup.topology.model_profile import Calibration
from scaleup.tune import BenchRequest

DATA = Path(__file__).parent / "data"
REAL_LOG = DATA / "mi300x_aac8_all_reduce_perf.log"
HEADER = (
    "#       size         count      type   redop    root     time   algbw   busbw #wrong"
    "     time   algbw   busbw #wrong\n"
)
SIZES = tuple(1 << k for k in range(3, 31, 5))  # 8 B ... 256 MiB, six sizes
runner = CliRunner()


def _synthetic_log(path: Path, calibration: Calibration) -> Path:
    """nccl-tests' table of dgx-h100 all_reduce simulated under ``calibration`` (the truth)."""
    truth = resolve_topology("dgx-h100").with_calibration(calibration)
    rows = bench_rows(truth, BenchRequest(sizes_bytes=SIZES))
    ranks = "".join(f"#  Rank {r} Group 0 Pid 1 on host device {r} H100\n" for r in range(8))
    body = "".join(
        f"{r.bytes:>12} {r.count:>12} float sum -1 {r.time_us:.2f} {r.algbw_gb_per_s:.2f} "
        f"{r.busbw_gb_per_s:.2f} 0 {r.time_us:.2f} {r.algbw_gb_per_s:.2f} "
        f"{r.busbw_gb_per_s:.2f} 0\n"
        for r in rows
    )
    path.write_text("# ./build/all_reduce_perf -b 8 -e 256M -f 32 -g 8\n" + ranks + HEADER + body)
    return path


def test_fit_recovers_known_parameters(tmp_path: Path) -> None:
    log = _synthetic_log(tmp_path / "synth.log", Calibration(link_efficiency=0.8,
                                                             launch_latency_s=5e-6))  # fmt: skip
    fit = fit_profile(resolve_topology("dgx-h100"), read_logs([log]), topology_name="dgx-h100")
    p = fit.profile
    assert fit.ranks == 8
    assert p.fit.fitted == ("link_efficiency", "launch_latency_us")
    assert p.link_efficiency == pytest.approx(0.8, abs=0.01)
    assert p.launch_latency_us == pytest.approx(5.0, abs=0.1)
    assert p.nic_efficiency is None  # one node: nothing in the log depends on the NICs
    assert p.fit.rms_log_error_after < 0.01 < p.fit.rms_log_error_before
    assert p.fit.evaluations <= 30
    assert all(abs(e.error_after) < 0.01 for e in fit.errors)


def test_real_log_improves_held_back_sizes() -> None:
    logs = read_logs([REAL_LOG])
    assert logs[0].ranks == 8
    assert logs[0].collective == "all_reduce"
    assert len(logs[0].rows) == 6  # in-place N/A: no row
    fit = fit_profile(resolve_topology("mi300x-8"), logs, topology_name="mi300x-8",
                      hold_out_every=2)  # fmt: skip
    held = [e for e in fit.errors if e.held_out]
    assert len(held) == 3

    def mean_abs_log(values: list[float]) -> float:
        return float(np.mean(np.abs(np.log1p(values))))

    before = mean_abs_log([e.error_before for e in held])
    after = mean_abs_log([e.error_after for e in held])
    assert after < 0.5 * before
    assert 0.3 <= (fit.profile.link_efficiency or 0) <= 1.0


def test_rccl_layout_and_nccl_debug_pins() -> None:
    text = (
        "NCCL INFO AllReduce: 1048576 Bytes -> Algo RING proto SIMPLE channel{Lo..Hi}={0..15}\n"
        "NCCL INFO AllReduce: 8 Bytes -> Algo 0 proto 0\n"
        "#  size  count  type  redop  time  algbw  busbw  error  time  algbw  busbw  error\n"
        "   8     2      float sum    20.1  0.00   0.00   0e+00  19.9  0.00   0.00   0e+00\n"
        "   1048576 262144 float sum  30.0  34.9   61.2   0e+00  29.0  36.1   63.3   0e+00\n"
    )
    log = parse_log(text, "rccl_all_reduce.log")
    assert [(r.size_bytes, r.placement, r.time_us) for r in log.rows][:2] == [
        (8, "out-of-place", 20.1), (8, "in-place", 19.9)]  # fmt: skip
    pins = {r.size_bytes: r.pin for r in log.rows}
    assert pins[8] == Pin("tree", "ll")
    assert pins[1048576] == Pin("ring", "simple", 16)


def test_profile_round_trip_and_bench_applies_it(tmp_path: Path) -> None:
    log = _synthetic_log(tmp_path / "synth.log", Calibration(launch_latency_s=20e-6))
    out = tmp_path / "profile.toml"
    result = runner.invoke(app, ["calibrate", str(log), "--topology", "dgx-h100", "--out",
                                 str(out), "--max-evals", "10", "--json"])  # fmt: skip
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert data["profile"]["launch_latency_us"] == pytest.approx(20.0, abs=0.5)
    profile = load_profile(out)
    assert profile.launch_latency_us == pytest.approx(data["profile"]["launch_latency_us"])
    args = ["bench", "--topology", "dgx-h100", "-b", "8", "-e", "8", "--json"]
    plain = json.loads(runner.invoke(app, args).output)
    fitted = json.loads(runner.invoke(app, [*args, "--profile", str(out)]).output)
    assert fitted[0]["time_us"] - plain[0]["time_us"] == pytest.approx(20.0, abs=0.5)


@pytest.mark.parametrize(
    ("name", "text", "message"),
    [
        ("empty.log", "", "empty file"),
        (
            "norows.log",
            "# nThread 1 nGpus 8\n" + HEADER + "# Out of bounds values : 0 OK\n",
            "no nccl-tests",
        ),
        ("malformed.log", HEADER + "8 2 float sum -1 oops 0 0 0 oops 0 0 0\n", "not a number"),
        ("short.log", HEADER + "8 2 float\n", "columns"),
        ("noheader.log", "8 2 float sum -1 1.0 0 0 0 1.0 0 0 0\n", "column header"),
    ],
)
def test_bad_logs_are_one_line_exit_2(tmp_path: Path, name: str, text: str, message: str) -> None:
    path = tmp_path / name
    path.write_text(text)
    result = runner.invoke(app, ["calibrate", str(path), "--topology", "dgx-h100"])
    assert result.exit_code == 2
    assert message in result.output
    assert name in result.output
    assert len(result.output.strip().splitlines()) == 1
    assert "Traceback" not in result.output


def test_missing_log_and_bad_profile_exit_2(tmp_path: Path) -> None:
    result = runner.invoke(app, ["calibrate", str(tmp_path / "nope.log"), "--topology", "dgx-h100"])
    assert result.exit_code == 2
    assert "cannot read" in result.output
    bad = tmp_path / "bad.toml"
    bad.write_text('[profile]\ntopology = "dgx-h100"\nlink_efficiency = 1.5\n')
    with pytest.raises(ProfileFileError, match="link_efficiency"):
        load_profile(bad)
    result = runner.invoke(app, ["bench", "-b", "8", "-e", "8", "--profile", str(bad)])
    assert result.exit_code == 2
    assert "link_efficiency" in result.output
    assert len(result.output.strip().splitlines()) == 1
    with pytest.raises(LogFileError, match="no log"):
        read_logs([])


def _profile_file(tmp_path: Path, **values: float) -> Path:
    body = "".join(f"{k} = {v}\n" for k, v in values.items())
    path = tmp_path / "profile.toml"
    path.write_text(f'[profile]\ntopology = "dgx-h100"\n{body}')
    return path


def test_compare_applies_the_profile_to_every_fabric(tmp_path: Path) -> None:
    """A 20 us launch latency adds 20 us to every timed row of every fabric (8 B: the tuner's
    choice does not change), and the model's step gets slower."""
    path = _profile_file(tmp_path, launch_latency_us=20.0)
    args = ["compare", "dgx-h100", "mi300x-8", "--sizes", "8", "-m", "llama-8b", "--json"]
    plain = json.loads(runner.invoke(app, args).output)
    fitted_run = runner.invoke(app, [*args, "--profile", str(path)])
    assert fitted_run.exit_code == 0, fitted_run.output
    fitted = json.loads(fitted_run.output)
    for before, after in zip(plain, fitted, strict=True):
        for op, rows in before["bench"].items():
            for row, row_after in zip(rows, after["bench"][op], strict=True):
                assert (row["algo"], row["proto"]) == (row_after["algo"], row_after["proto"])
                assert row_after["time_us"] - row["time_us"] == pytest.approx(20.0, abs=1e-6)
        assert after["model"]["step_time_s"] > before["model"]["step_time_s"]


def test_plan_with_a_profile_is_the_plan_on_the_calibrated_fabric(tmp_path: Path) -> None:
    """``plan --profile`` equals planning on ``Topology.with_calibration``; halving the link
    efficiency makes communication slower, never compute."""
    from scaleup.workload.config import ParallelConfig
    from scaleup.workload.plan import plan

    path = _profile_file(tmp_path, link_efficiency=0.5)
    args = ["plan", "--model", "llama-8b", "--topology", "dgx-h100", "--tp", "8", "--json"]
    plain = json.loads(runner.invoke(app, args).output)
    result = runner.invoke(app, [*args, "--profile", str(path)])
    assert result.exit_code == 0, result.output
    fitted = json.loads(result.output)
    one = fitted[0] if isinstance(fitted, list) else fitted
    base = plain[0] if isinstance(plain, list) else plain
    assert one["comm_exposed_s"] > base["comm_exposed_s"]
    assert one["compute_s"] == pytest.approx(base["compute_s"])
    topo = resolve_topology("dgx-h100").with_calibration(load_profile(path).calibration())
    direct = plan("llama-8b", topo, ParallelConfig(tp=8, dp=1))
    assert one["step_time_s"] == pytest.approx(direct.to_dict()["step_time_s"], rel=1e-9)


@pytest.mark.parametrize("command", [["plan", "--model", "llama-8b"], ["compare", "dgx-h100"]])
def test_plan_and_compare_refuse_a_bad_profile(tmp_path: Path, command: list[str]) -> None:
    path = _profile_file(tmp_path, link_efficiency=1.5)
    result = runner.invoke(app, [*command, "--profile", str(path)])
    assert result.exit_code == 2
    assert "profile.toml" in result.output
    assert len(result.output.strip().splitlines()) == 1


def test_bench_header_says_the_fabric_is_calibrated(tmp_path: Path) -> None:
    path = _profile_file(tmp_path, link_efficiency=0.5, launch_latency_us=3.0)
    out = runner.invoke(app, ["bench", "-b", "8", "-e", "8", "--profile", str(path)]).output
    calibrated = [line for line in out.splitlines() if line.startswith("# Calibrated:")]
    assert calibrated == [
        "# Calibrated: link efficiency 0.500, launch latency +3.00 us (--profile)"
    ]
    assert "# Calibrated" not in runner.invoke(app, ["bench", "-b", "8", "-e", "8"]).output
