"""Memory per device: 16 B/param, ZeRO by hand, Korthikanti's activation formula, verdicts."""

from __future__ import annotations

import pytest

from scaleup.workload.config import ParallelConfig, Precision
from scaleup.workload.memory import layer_activation_bytes, memory_per_device, stage_params
from scaleup.workload.models import ModelSpec, get_model

#: 226,624 parameters, counted by hand in test_workload_models.py.
TINY = ModelSpec(
    name="tiny", layers=2, hidden=64, heads=4, ffn=256, vocab=1000, gated_mlp=False, seq=128
)
P = 226_624

#: GPT-shaped (MHA, f = 4h, plain MLP): the shape Korthikanti et al. derived their formula for.
GPT = ModelSpec(
    name="gpt",
    layers=4,
    hidden=1024,
    heads=16,
    ffn=4096,
    vocab=50000,
    gated_mlp=False,
    norm="layernorm",
    bias=True,
    position="learned",
    seq=2048,
)


def _mem(model, **cfg):
    return memory_per_device(model, ParallelConfig(**cfg), hbm_bytes=80e9, domain_size=8)


def test_mixed_precision_adam_is_16_bytes_per_param() -> None:
    prec = Precision()
    assert (prec.param_bytes, prec.grad_bytes, prec.optimizer_bytes) == (2, 2, 12)
    assert prec.bytes_per_param == 16
    m = _mem(TINY)
    assert (m.params_bytes, m.grads_bytes, m.optimizer_bytes) == (2 * P, 2 * P, 12 * P)
    assert m.params_bytes + m.grads_bytes + m.optimizer_bytes == 16 * P == 3_625_984
    assert m.model_state_bytes == 16 * P
    assert Precision(grad_bytes=4).bytes_per_param == 18


@pytest.mark.parametrize(
    ("zero", "expected"),
    [
        (0, (2 * P, 2 * P, 12 * P)),  # replicated: 16 P = 3,625,984 B
        (1, (2 * P, 2 * P, 12 * P / 4)),  # optimizer sharded: 4P + 3P = 1,586,368 B
        (2, (2 * P, 2 * P / 4, 12 * P / 4)),  # + gradients: 2P + 3.5P
        (3, (2 * P / 4, 2 * P / 4, 12 * P / 4)),  # + weights: 16 P / 4 = 906,496 B
    ],
)
def test_zero_stages_divide_by_dp_by_hand(zero: int, expected) -> None:
    m = _mem(TINY, dp=4, zero=zero)
    assert (m.params_bytes, m.grads_bytes, m.optimizer_bytes) == pytest.approx(expected)


def test_zero3_state_is_16_bytes_per_param_over_dp() -> None:
    m = _mem(TINY, dp=4, zero=3)
    assert m.params_bytes + m.grads_bytes + m.optimizer_bytes == pytest.approx(906_496)


def test_korthikanti_formula_no_parallelism() -> None:
    s, b, h, a = 2048, 2, GPT.hidden, GPT.heads
    got = layer_activation_bytes(GPT, ParallelConfig(mbs=b, recompute="none", sp=False))
    assert got == pytest.approx(s * b * h * (34 + 5 * a * s / h))


@pytest.mark.parametrize("t", [2, 4, 8])
def test_korthikanti_formula_tensor_and_sequence_parallel(t: int) -> None:
    s, b, h, a = 2048, 1, GPT.hidden, GPT.heads
    tp_only = layer_activation_bytes(GPT, ParallelConfig(tp=t, recompute="none", sp=False))
    assert tp_only == pytest.approx(s * b * h * (10 + 24 / t + 5 * a * s / (h * t)))
    tp_sp = layer_activation_bytes(GPT, ParallelConfig(tp=t, recompute="none", sp=True))
    assert tp_sp == pytest.approx(s * b * h / t * (34 + 5 * a * s / h))
    selective = layer_activation_bytes(GPT, ParallelConfig(tp=t, recompute="selective", sp=True))
    assert selective == pytest.approx(s * b * h * 34 / t)


def test_full_recompute_stores_layer_inputs() -> None:
    deep = GPT.model_copy(update={"layers": 24})
    cfg = ParallelConfig(recompute="full", sp=False)
    m = _mem(deep, recompute="full", sp=False)
    s, h = 2048, deep.hidden
    working = layer_activation_bytes(deep, cfg, scores=True)  # one layer replayed at a time
    logits = 4 * s * deep.vocab
    assert m.activations_bytes == pytest.approx(deep.layers * 2 * s * h + working + logits)
    assert m.activations_bytes < _mem(deep, recompute="selective", sp=False).activations_bytes


def test_pipeline_first_stage_holds_pp_microbatches() -> None:
    small_vocab = GPT.model_copy(
        update={"vocab": 1000}
    )  # so that the last stage's logits stay small
    cfg = ParallelConfig(pp=4, gbs=16)
    per_layer = layer_activation_bytes(small_vocab, cfg)
    m = memory_per_device(small_vocab, cfg, hbm_bytes=80e9, domain_size=8)
    # stage 0: 1 layer x 4 micro-batches in flight; last stage: 1 layer x 1 + logits
    assert m.stage == 0
    assert m.activations_bytes == pytest.approx(4 * per_layer)


def test_stage_params_sum_to_model_and_tp_divides() -> None:
    m = get_model("llama-70b")
    for cfg in (ParallelConfig(pp=4), ParallelConfig(pp=3, tp=8)):
        total = sum(sp.total for sp in stage_params(m, cfg)) * cfg.tp
        assert total == pytest.approx(m.params, rel=1e-9)
    moe = get_model("mixtral-8x7b")
    sp = stage_params(moe, ParallelConfig(ep=8, dp=8))[0]
    assert sp.expert == pytest.approx(moe.layers * moe.expert_params)  # one expert per layer


def test_does_not_fit_reports_shortfall() -> None:
    m = _mem(get_model("llama-70b"))
    assert not m.fits
    assert m.shortfall_bytes == pytest.approx(m.total_bytes - 80e9)
    assert m.shortfall_bytes > 16 * 70e9 - 80e9  # at least the model state beyond one device
    assert m.max_mbs == 0


def test_max_mbs_is_the_largest_that_fits() -> None:
    model = get_model("llama-8b")
    m = memory_per_device(model, ParallelConfig(tp=8, dp=8, zero=3), hbm_bytes=80e9, domain_size=8)
    assert m.fits
    assert m.max_mbs >= 1

    def total(b):
        return memory_per_device(
            model, ParallelConfig(tp=8, dp=8, zero=3, mbs=b), hbm_bytes=80e9, domain_size=8
        ).total_bytes

    assert total(m.max_mbs) <= 80e9 < total(m.max_mbs + 1)


def test_pooled_hbm_figures() -> None:
    m = memory_per_device(
        get_model("llama-405b"), ParallelConfig(tp=8, dp=9), hbm_bytes=186e9, domain_size=72
    )
    assert m.domain_pooled_hbm_bytes == 72 * 186e9
    assert m.model_state_bytes == 16 * get_model("llama-405b").params
    assert m.model_state_bytes < m.domain_pooled_hbm_bytes  # held by the pool, not by one device
