"""Traffic per step (Megatron's TP volume, DP/ZeRO, PP, EP) and the step-time composition."""

from __future__ import annotations

import pytest
from workload_fake_timer import constant_timer

from scaleup.errors import UsageError
from scaleup.topology import resolve_topology
from scaleup.workload.config import ParallelConfig
from scaleup.workload.models import get_model
from scaleup.workload.step import model_flops_per_token, stage_hardware_flops, step_time
from scaleup.workload.traffic import step_traffic, tp_bytes_per_layer

L70 = get_model("llama-70b")
DGX = resolve_topology("dgx-h100")
PEAK = 989.4e12


def _by(calls, kind):
    return [c for c in calls if c.kind == kind]


def test_megatron_tp_four_all_reduces_of_bsh_per_layer() -> None:
    b, s, h = 2, 4096, L70.hidden
    cfg = ParallelConfig(tp=8, sp=False, mbs=b, seq=s)
    (call,) = step_traffic(L70, cfg)
    assert call.collective == "all_reduce"
    assert call.nbytes == tp_bytes_per_layer(L70, cfg) == b * s * h * 2  # bf16
    assert call.count == 4 * L70.layers  # 2 forward + 2 backward per layer, one micro-batch
    assert call.ranks == tuple(range(8))


def test_sequence_parallel_swaps_each_all_reduce_for_rs_plus_ag() -> None:
    cfg = ParallelConfig(tp=4, sp=True, mbs=1, seq=2048)
    calls = step_traffic(L70, cfg)
    assert sorted(c.collective for c in calls) == ["all_gather", "reduce_scatter"]
    assert all(c.count == 4 * L70.layers and c.nbytes == 2048 * L70.hidden * 2 for c in calls)


def test_full_recompute_replays_the_forward_all_reduces() -> None:
    (call,) = step_traffic(L70, ParallelConfig(tp=8, sp=False, recompute="full"))
    assert call.count == 6 * L70.layers


def test_tp_calls_scale_with_microbatches_and_stage_layers() -> None:
    cfg = ParallelConfig(tp=8, pp=4, dp=1, sp=False, gbs=32)
    (tp,) = _by(step_traffic(L70, cfg), "tp")
    assert tp.count == 4 * (L70.layers // 4) * 32
    (pp,) = _by(step_traffic(L70, cfg), "pp")
    assert (pp.collective, pp.ranks, pp.count) == ("send_recv", (0, 8), 2 * 32)
    assert pp.nbytes == 8192 * L70.hidden * 2 // 8  # scatter/gather: 1/tp per rank


@pytest.mark.parametrize(
    ("zero", "expected"),
    [
        (0, [("all_reduce", 1)]),
        (1, [("reduce_scatter", 1), ("all_gather", 1)]),
        (2, [("reduce_scatter", 4), ("all_gather", 1)]),
        (3, [("all_gather", 8), ("reduce_scatter", 4)]),
    ],
)
def test_dp_traffic_per_zero_stage(zero: int, expected) -> None:
    cfg = ParallelConfig(tp=2, dp=4, zero=zero, gbs=16)
    dp = _by(step_traffic(get_model("llama-8b"), cfg), "dp")
    assert [(c.collective, c.count) for c in dp] == expected
    assert all(c.ranks == (0, 2, 4, 6) for c in dp)
    grads = [c for c in dp if c.collective in ("all_reduce", "reduce_scatter")][0]
    assert grads.nbytes == int(get_model("llama-8b").params / 2 * 2)


def test_moe_all_to_all_and_expert_dp_group() -> None:
    moe = get_model("mixtral-8x7b")
    cfg = ParallelConfig(tp=1, dp=8, ep=4, seq=4096)
    calls = step_traffic(moe, cfg)
    (a2a,) = _by(calls, "ep")
    assert (a2a.collective, a2a.ranks, a2a.count) == ("all_to_all", (0, 1, 2, 3), 4 * moe.layers)
    assert a2a.nbytes == 4096 * moe.top_k * moe.hidden * 2
    groups = {c.label.split()[0]: c.ranks for c in _by(calls, "dp")}
    assert groups == {"dense": tuple(range(8)), "expert": (0, 4)}


def test_flops_formula() -> None:
    s = 8192
    per_token = model_flops_per_token(L70, s)
    assert per_token == pytest.approx(6 * L70.matmul_params_per_token + 12 * 80 * 8192 * s)
    # close to 6N plus attention (N_matmul leaves out the 1.05B-entry embedding lookup)
    assert per_token / (6 * L70.params) == pytest.approx(
        1 + 12 * 80 * 8192 * s / (6 * L70.params), rel=0.02
    )
    fwd, bwd = stage_hardware_flops(L70, ParallelConfig(recompute="none"), 0)
    assert (fwd + bwd) == pytest.approx(per_token * s)
    fwd_f, bwd_f = stage_hardware_flops(L70, ParallelConfig(recompute="full"), 0)
    assert bwd_f - bwd == pytest.approx(fwd - 2 * L70.vocab * L70.hidden * s)  # one more forward


def test_exposed_communication_and_overlap_modes() -> None:
    cfg = ParallelConfig(tp=8, dp=1, sp=False)
    model = get_model("llama-8b")
    none = step_time(
        model, cfg, DGX, peak_flops=PEAK, overlap="none", comm_time=constant_timer(1e-4)
    )
    assert none.exposed_s["tp"] == pytest.approx(4 * 32 * 1e-4)
    assert none.step_time_s == pytest.approx(none.compute_s + none.comm_exposed_s)
    assert none.mfu == pytest.approx(none.model_flops / (none.step_time_s * 8 * PEAK))
    hidden = step_time(
        model, cfg, DGX, peak_flops=PEAK, overlap="all", comm_time=constant_timer(1e-4)
    )
    assert hidden.comm_exposed_s == 0.0
    assert hidden.mfu > none.mfu


def test_dp_overlapped_with_backward_by_default() -> None:
    model = get_model("llama-8b")
    cfg = ParallelConfig(tp=1, dp=8)
    small = step_time(model, cfg, DGX, peak_flops=PEAK, comm_time=constant_timer(1e-3))
    assert small.comm_s["dp"] == pytest.approx(1e-3)
    assert small.exposed_s["dp"] == 0.0
    huge = step_time(model, cfg, DGX, peak_flops=PEAK, comm_time=constant_timer(100.0))
    _, bwd = stage_hardware_flops(model, cfg, 0)
    assert huge.exposed_s["dp"] == pytest.approx(100.0 - bwd / (0.5 * PEAK))


def test_pipeline_bubble_is_p_minus_1_over_m() -> None:
    cfg = ParallelConfig(tp=1, pp=4, dp=1, gbs=16)
    st = step_time(L70, cfg, DGX, peak_flops=PEAK, comm_time=constant_timer(0.0))
    per_mb = st.compute_s / 16
    assert st.bubble_s == pytest.approx(3 * per_mb)
    inter = step_time(L70, cfg.with_(vpp=2), DGX, peak_flops=PEAK, comm_time=constant_timer(0.0))
    assert inter.bubble_s == pytest.approx(st.bubble_s / 2)


def test_bad_efficiency_and_overlap() -> None:
    with pytest.raises(UsageError, match="compute-efficiency"):
        step_time(
            L70,
            ParallelConfig(),
            DGX,
            peak_flops=PEAK,
            compute_efficiency=0,
            comm_time=constant_timer(0),
        )
    with pytest.raises(UsageError, match="overlap"):
        step_time(
            L70, ParallelConfig(), DGX, peak_flops=PEAK, overlap="some", comm_time=constant_timer(0)
        )
