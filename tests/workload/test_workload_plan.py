"""plan() and sweep_tp(): the pure entry points the CLI and the sweeps call."""

from __future__ import annotations

import json

import pytest

from scaleup.errors import SpecFileError, UsageError
from scaleup.workload.config import ParallelConfig
from scaleup.workload.plan import plan, sweep_tp, tp_candidates

KEYS = {"params", "memory_per_device_bytes", "fits", "step_time_s", "comm_exposed_s", "mfu"}


def test_issue_example_fits_on_nvl72(fake_timer) -> None:
    r = plan("llama-70b", "gb200-nvl72", tp=8, pp=1, dp=9, seq=8192, mbs=1, comm_time=fake_timer)
    d = r.to_dict()
    assert set(d) >= KEYS
    json.dumps(d)  # serialisable
    assert d["fits"]
    assert d["n_devices"] == 72
    assert d["domain_size"] == 72
    assert 0 < d["mfu"] < 0.5
    assert d["comm_exposed_s"] > 0
    assert d["step_time_s"] == pytest.approx(d["compute_s"] + d["bubble_s"] + d["comm_exposed_s"])
    assert r.verdict.startswith("fits")


def test_not_fitting_reports_shortfall(fake_timer) -> None:
    r = plan("llama-405b", "dgx-h100", tp=8, dp=1, comm_time=fake_timer)
    assert not r.fits
    mem = r.memory
    assert mem.shortfall_bytes == pytest.approx(mem.total_bytes - mem.hbm_bytes)
    assert mem.shortfall_bytes > 600e9  # 16 B x 405 B params / 8 devices is ~812 GB each
    assert "does not fit" in r.verdict
    assert "short by" in r.verdict
    assert r.to_dict()["shortfall_bytes"] == mem.shortfall_bytes


def test_multi_node_tp_crosses_scale_out(fake_timer) -> None:
    inside = plan("llama-8b", "2xdgx-h100", tp=8, dp=2, comm_time=fake_timer)
    across = plan("llama-8b", "2xdgx-h100", tp=16, dp=1, comm_time=fake_timer)
    t_in = {c.call.kind: c.time_s for c in inside.step.calls}["tp"]
    t_out = {c.call.kind: c.time_s for c in across.step.calls}["tp"]
    assert t_out > 4 * t_in  # the 16-rank group leaves the NVLink domain


def test_too_many_devices_and_bad_configs(fake_timer) -> None:
    with pytest.raises(UsageError, match="exceeds the 8 accelerators"):
        plan("llama-70b", "dgx-h100", tp=8, dp=2, comm_time=fake_timer)
    with pytest.raises(UsageError, match="attention heads"):
        plan("llama-8b", "dgx-h100", tp=3, comm_time=fake_timer)
    with pytest.raises(UsageError, match="dense"):
        plan("llama-8b", "dgx-h100", dp=2, ep=2, comm_time=fake_timer)
    with pytest.raises(UsageError, match="multiple of mbs"):
        plan("llama-8b", "dgx-h100", dp=8, gbs=12, comm_time=fake_timer)
    with pytest.raises(SpecFileError):
        plan("no-such-model", "dgx-h100", comm_time=fake_timer)


def test_fewer_devices_than_topology_is_allowed(fake_timer) -> None:
    r = plan("llama-8b", "dgx-h100", ParallelConfig(tp=4, dp=1), comm_time=fake_timer)
    assert r.config.n_devices == 4
    assert r.n_available == 8


def test_moe_plan(fake_timer) -> None:
    r = plan("mixtral-8x7b", "dgx-h100", tp=1, dp=8, ep=8, zero=1, seq=4096, comm_time=fake_timer)
    assert r.step.comm_s["ep"] > 0
    assert r.model.active_params < r.model.params


def test_sweep_tp_holds_devices(fake_timer) -> None:
    rows = sweep_tp("llama-8b", "dgx-h100", ParallelConfig(tp=1, dp=8), comm_time=fake_timer)
    assert [r.tp for r in rows] == [1, 2, 4, 8]
    results = [r.result for r in rows if r.result is not None]
    assert [r.config.dp for r in results] == [8, 4, 2, 1]
    assert all(r.config.n_devices == 8 for r in results)
    assert rows[-1].to_dict()["tp"] == 8


def test_sweep_tp_skips_impossible_rows(fake_timer) -> None:
    rows = sweep_tp(
        "mixtral-8x7b", "dgx-h100", ParallelConfig(tp=1, dp=8, ep=4), comm_time=fake_timer
    )
    skipped = {r.tp: r.skipped for r in rows if r.skipped}
    assert set(skipped) == {4, 8}
    assert "ep=4" in skipped[4]


def test_tp_candidates() -> None:
    assert tp_candidates(8, 8) == [1, 2, 4, 8]
    assert tp_candidates(72, 72) == [1, 2, 4, 8, 16, 32, 64, 72]
    assert tp_candidates(72, 9) == [1, 2, 4, 8]


def test_with_the_tuner() -> None:
    """End to end with the real timer (:class:`scaleup.tune.CollectiveTimer`)."""
    r = plan("llama-8b", "dgx-h100", tp=8, dp=1, seq=2048)
    times = {c.call.collective: c.time_s for c in r.step.calls}
    assert set(times) == {"all_gather", "reduce_scatter"}
    assert all(0 < t < 1e-2 for t in times.values())
    assert 0 < r.step.mfu < 0.5
