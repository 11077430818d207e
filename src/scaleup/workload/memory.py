"""Memory per device: weights, gradients, optimizer state and activations, per pipeline stage.

Model state (per parameter a device holds, :class:`~scaleup.workload.config.Precision`):
bf16 weights 2 B + bf16 gradients 2 B + fp32 master weights 4 B + two fp32 Adam moments 8 B =
16 B. Tensor parallelism divides every layer's weights by ``tp`` (vocabulary-parallel
embeddings too); pipeline parallelism gives each stage its layers (the first stage also holds
the embedding, the last the output projection, a copy of the embedding when tied). Expert
weights are divided across ``ep`` ranks. ZeRO (Rajbhandari et al. 2020) shards across the DP
group: stage 1 the optimizer state, stage 2 also the gradients, stage 3 also the weights. Expert
weights are sharded over their own data-parallel group, ``dp / ep`` ranks.

Activations per layer and micro-batch follow Korthikanti et al. 2022 ("Reducing Activation
Recomputation in Large Transformer Models", section 4), ``s b h (34 + 5 a s / h)`` bytes for
GPT with 16-bit activations and 1-byte dropout masks, generalised term by term to grouped-query
attention (K and V are ``kv_dim`` wide) and to a gated MLP of width ``f``::

    replicated under TP (LayerNorm inputs 4sbh, QKV and MLP inputs 2sbh each, masks 2sbh) 10 sbh
    split by TP   Q 2sbh, K and V 2sb*kv_dim each, attention-output input 2sbh,
                  MLP  4sbf (plain: GeLU input, FC2 input) or 8sbf (gated: gate, up, SiLU, product)
    scores        5 a s^2 b (softmax output, dropout mask and output), split by TP

With ``kv_dim = h`` and ``f = 4h`` this is the paper's ``34 sbh + 5 a s^2 b`` exactly; with TP
and no sequence parallelism ``sbh (10 + 24/t + 5as/(ht))``, with sequence parallelism all of it
divided by ``t``. Selective recomputation drops the score term (FlashAttention stores no scores
either); full recomputation keeps only each layer's input (2sbh, divided by ``t`` under SP) plus
one layer's working set. With 1F1B the first stage holds ``min(pp, m)`` micro-batches in
flight (stage ``i``: ``min(pp - i, m)``), times ``1 + (p-1)/(p v)`` with ``v`` interleaved
stages (Korthikanti et al., section 4.2.3). The last stage also holds the fp32 logits of one
micro-batch, ``4 s b V / t``. Experts of an MoE layer see ``top_k`` times the tokens.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from scaleup.workload.config import ParallelConfig
from scaleup.workload.models import ModelSpec

__all__ = [
    "MemoryBreakdown",
    "StageParams",
    "layer_activation_bytes",
    "memory_per_device",
    "stage_params",
]


@dataclass(frozen=True)
class StageParams:
    """Parameters one device of a pipeline stage holds: dense (shared over DP) and expert."""

    stage: int
    layers: int
    dense: float
    expert: float

    @property
    def total(self) -> float:
        """All parameters on the device."""
        return self.dense + self.expert


def stage_params(model: ModelSpec, cfg: ParallelConfig) -> list[StageParams]:
    """Parameters per device for each pipeline stage (TP and EP division applied)."""
    out = []
    layers = cfg.stage_layers(model)
    last = cfg.pp - 1
    for i, n in enumerate(layers):
        dense = n * model.dense_params_per_layer / cfg.tp
        expert = n * (model.experts // cfg.ep) * model.expert_params / cfg.tp
        if not model.is_moe:  # a dense model's MLP is replicated over the whole DP group
            dense, expert = dense + expert, 0.0
        if i == 0:
            dense += model.embedding_params / cfg.tp
        if i == last:
            dense += model.output_params / cfg.tp
            if model.tied_embeddings and cfg.pp > 1:
                dense += model.vocab * model.hidden / cfg.tp  # the copy the last stage keeps
        out.append(StageParams(stage=i, layers=n, dense=dense, expert=expert))
    return out


def layer_activation_bytes(
    model: ModelSpec, cfg: ParallelConfig, *, mbs: int | None = None, scores: bool | None = None
) -> float:
    """Activation bytes one layer stores for one micro-batch (no recomputation applied).

    ``scores`` (default: unless ``cfg.recompute`` is selective/full) includes the ``5 a s^2 b``
    attention-score term.
    """
    s = cfg.seq_len(model)
    b = cfg.mbs if mbs is None else mbs
    h, f, kv, a, t = model.hidden, model.ffn, model.kv_dim, model.heads, cfg.tp
    sb = s * b
    replicated = 10 * sb * h
    mlp = (8 if model.gated_mlp else 4) * sb * f * model.top_k
    split = 2 * sb * h + 4 * sb * kv + 2 * sb * h + mlp
    with_scores = cfg.recompute == "none" if scores is None else scores
    score_bytes = 5 * a * s * s * b if with_scores else 0
    if cfg.sp:
        return (replicated + split + score_bytes) / t
    return replicated + (split + score_bytes) / t


def _stage_activation_bytes(
    model: ModelSpec, cfg: ParallelConfig, stage: int, layers: int, mbs: int
) -> float:
    """Activations of one stage at its peak (in-flight micro-batches, recomputation applied)."""
    m, p, v = cfg.microbatches, cfg.pp, cfg.vpp
    in_flight: float = min(p - stage, m)
    if v > 1 and p > 1:
        in_flight *= 1 + (p - 1) / (p * v)
    s, h, t = cfg.seq_len(model), model.hidden, cfg.tp
    if cfg.recompute == "full":
        per_layer = 2 * s * mbs * h / (t if cfg.sp else 1)
        working = layer_activation_bytes(model, cfg, mbs=mbs, scores=True)
        total = in_flight * layers * per_layer + working
    else:
        total = in_flight * layers * layer_activation_bytes(model, cfg, mbs=mbs)
    if stage == p - 1:
        total += 4 * s * mbs * model.vocab / t
    return total


@dataclass(frozen=True)
class MemoryBreakdown:
    """Memory of the fullest device, what it is made of, and the verdict against its HBM.

    ``headroom_bytes`` is negative when the device does not fit (then it is the shortfall).
    ``max_mbs`` is the largest micro-batch whose activations still fit on every stage (0 when
    even the model state does not fit), at the same number of micro-batches in flight.
    """

    stage: int
    params_per_device: float
    params_bytes: float
    grads_bytes: float
    optimizer_bytes: float
    activations_bytes: float
    reserved_bytes: float
    hbm_bytes: float
    max_mbs: int
    model_state_bytes: float
    job_total_bytes: float
    used_pooled_hbm_bytes: float
    domain_pooled_hbm_bytes: float

    @property
    def total_bytes(self) -> float:
        """Everything on the fullest device."""
        return (
            self.params_bytes
            + self.grads_bytes
            + self.optimizer_bytes
            + self.activations_bytes
            + self.reserved_bytes
        )

    @property
    def headroom_bytes(self) -> float:
        """HBM left over on the fullest device (negative: the shortfall)."""
        return self.hbm_bytes - self.total_bytes

    @property
    def fits(self) -> bool:
        """Whether the fullest device fits in its HBM."""
        return self.headroom_bytes >= 0

    @property
    def shortfall_bytes(self) -> float:
        """How much is missing on the fullest device (0 when it fits)."""
        return max(0.0, -self.headroom_bytes)

    def to_dict(self) -> dict[str, float | int | bool]:
        """Fields plus total, headroom, fits and shortfall, for ``--json``."""
        data = asdict(self)
        data.update(
            total_bytes=self.total_bytes,
            headroom_bytes=self.headroom_bytes,
            fits=self.fits,
            shortfall_bytes=self.shortfall_bytes,
        )
        return data


def _state_bytes(sp: StageParams, cfg: ParallelConfig) -> tuple[float, float, float]:
    """Weights, gradients, optimizer state of one device, ZeRO sharding applied."""
    prec = cfg.precision
    expert_dp = cfg.dp // cfg.ep

    def shard(n_dense: float, n_expert: float, stage: int) -> float:
        if cfg.zero >= stage:
            return n_dense / cfg.dp + n_expert / expert_dp
        return n_dense + n_expert

    params = prec.param_bytes * shard(sp.dense, sp.expert, 3)
    grads = prec.grad_bytes * shard(sp.dense, sp.expert, 2)
    optimizer = prec.optimizer_bytes * shard(sp.dense, sp.expert, 1)
    return params, grads, optimizer


def memory_per_device(
    model: ModelSpec,
    cfg: ParallelConfig,
    *,
    hbm_bytes: float,
    domain_size: int,
    reserved_bytes: float = 0.0,
) -> MemoryBreakdown:
    """Memory of the fullest device of the job, compared with ``hbm_bytes`` per device.

    Parameters
    ----------
    model, cfg
        The model and the parallel configuration (assumed checked).
    hbm_bytes
        HBM of one accelerator.
    domain_size
        Accelerators in one scale-up domain (for the pooled-HBM comparison).
    reserved_bytes
        Memory set aside per device (runtime context, allocator fragmentation, buffers).

    Examples
    --------
    >>> from scaleup.workload.models import get_model
    >>> llama = get_model("llama-8b")
    >>> m = memory_per_device(llama, ParallelConfig(), hbm_bytes=80e9, domain_size=8)
    >>> m.fits, m.params_bytes + m.grads_bytes + m.optimizer_bytes == 16 * llama.params
    (False, True)
    """
    stages = stage_params(model, cfg)
    best: tuple[float, int, tuple[float, float, float], float] | None = None
    job_total = 0.0
    max_mbs: int | None = None
    for sp in stages:
        state = _state_bytes(sp, cfg)
        act = _stage_activation_bytes(model, cfg, sp.stage, sp.layers, cfg.mbs)
        total = sum(state) + act + reserved_bytes
        job_total += total * cfg.tp * cfg.dp
        per_mb = _stage_activation_bytes(model, cfg, sp.stage, sp.layers, 1)
        room = hbm_bytes - reserved_bytes - sum(state)
        fit_mbs = int(room // per_mb) if room > 0 and per_mb > 0 else 0
        max_mbs = fit_mbs if max_mbs is None else min(max_mbs, fit_mbs)
        if best is None or total > best[0]:
            best = (total, sp.stage, state, act)
    assert best is not None  # pp >= 1, so there is at least one stage
    _, stage, (params_b, grads_b, opt_b), act_b = best
    return MemoryBreakdown(
        stage=stage,
        params_per_device=stages[stage].total,
        params_bytes=params_b,
        grads_bytes=grads_b,
        optimizer_bytes=opt_b,
        activations_bytes=act_b,
        reserved_bytes=reserved_bytes,
        hbm_bytes=hbm_bytes,
        max_mbs=max_mbs or 0,
        model_state_bytes=float(cfg.precision.bytes_per_param * model.params),
        job_total_bytes=job_total,
        used_pooled_hbm_bytes=hbm_bytes * cfg.n_devices,
        domain_pooled_hbm_bytes=hbm_bytes * domain_size,
    )
