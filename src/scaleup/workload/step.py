"""Step time: model FLOPs at a stated fraction of peak, plus the simulated communication.

FLOPs (Narayanan et al. 2021, appendix; the PaLM MFU convention, Chowdhery et al. 2022,
appendix B). Per token, a training step (forward + backward) costs::

    model FLOPs / token = 6 N_matmul + 12 L h s

``N_matmul`` is the weights multiplied per token (for MoE only the ``top_k`` experts; the
output projection counted, the embedding lookup not) and ``12 L h s`` the attention scores
(``QK^T`` and ``AV``, 4 s h per layer forward, times 3; causal masking not subtracted). This
is the numerator of MFU. The device executes more (hardware FLOPs): full recomputation replays
the forward pass (``+ 2 N + 4 L h s``, i.e. x 4/3), selective recomputation the attention scores
(``+ 4 L h s``). Compute time is hardware FLOPs over ``compute_efficiency x peak``.

Communication: every distinct call of :func:`scaleup.workload.traffic.step_traffic` is timed
once by the tuner (:class:`scaleup.tune.CollectiveTimer`: the schedule NCCL's rules would pick,
simulated on the ranks of that group, one tuning session per plan), times its count. The group
is simulated on the part of the fabric it can reach and once per class of equivalent groups
(:class:`~scaleup.workload.groups.GroupTimer`: exact, see there). Overlap
(``overlap=``):

- ``"none"``: every collective is exposed;
- ``"dp"`` (default): data-parallel traffic hides under backward compute (DDP / Megatron
  bucketed gradient reduction): once-per-step gradient reduction behind the backward pass of
  the last micro-batch, per-micro-batch ZeRO 2/3 traffic behind each micro-batch's compute;
  TP, EP and PP traffic is on the critical path (exposed), as in Megatron without TP overlap;
- ``"all"``: TP, EP and PP traffic also overlaps the micro-batch's compute (as with
  communication/GEMM overlap kernels); only what exceeds the compute time is exposed.

Pipeline (1F1B, Narayanan et al. 2021, section 2.2): with ``m`` micro-batches and ``v``
interleaved stages a step is ``(m + (p-1)/v) x unit`` where ``unit`` is one micro-batch's
forward + backward on the slowest stage including its exposed communication; the bubble is
the ``(p-1)/v`` part, i.e. a fraction ``(p-1)/(v m)`` of the useful time.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from scaleup.errors import UsageError
from scaleup.workload.config import ParallelConfig
from scaleup.workload.models import ModelSpec
from scaleup.workload.traffic import CommCall, step_traffic

__all__ = [
    "DEFAULT_COMPUTE_EFFICIENCY",
    "CommTimer",
    "StepBreakdown",
    "TimedCall",
    "default_comm_timer",
    "model_flops_per_token",
    "stage_hardware_flops",
    "step_time",
]

#: Default fraction of dense BF16 peak the layers' kernels sustain. Large BF16 GEMMs reach
#: about 60-75 % of peak on A100/H100; attention, normalisation, element-wise and optimizer
#: kernels run lower, so a whole forward/backward lands near half of peak. With it, the planner
#: reproduces the 38-45 % MFU of well-tuned published runs once communication and the pipeline
#: bubble are added (docs/planner.md compares one).
DEFAULT_COMPUTE_EFFICIENCY = 0.5

#: ``timer(topology, collective, nbytes, ranks=..., dtype=...) -> seconds``.
CommTimer = Callable[..., float]


def default_comm_timer() -> CommTimer:
    """The tuner's choice with a session of its own, each group timed on its sub-fabric once
    per class of equivalent groups (:class:`~scaleup.workload.groups.GroupTimer`)."""
    from scaleup.workload.groups import GroupTimer  # the tuner and simulator: only when timing

    return GroupTimer()


def model_flops_per_token(model: ModelSpec, seq: int) -> float:
    """Model FLOPs per trained token: ``6 N_matmul + 12 L h s``."""
    return 6.0 * model.matmul_params_per_token + 12.0 * model.layers * model.hidden * seq


def stage_hardware_flops(model: ModelSpec, cfg: ParallelConfig, stage: int) -> tuple[float, float]:
    """(forward, backward) FLOPs one device of ``stage`` executes per micro-batch.

    The backward includes what recomputation replays. TP divides everything by ``tp``.
    """
    s = cfg.seq_len(model)
    tokens = cfg.mbs * s
    layers = cfg.stage_layers(model)[stage]
    layer_w = (
        model.attention_params_per_layer
        + model.router_params_per_layer
        + model.top_k * model.expert_params
    )
    fwd_layer = 2.0 * layer_w + 4.0 * model.hidden * s
    fwd = layers * fwd_layer
    bwd = 2.0 * fwd
    if cfg.recompute == "full":
        bwd += fwd
    elif cfg.recompute == "selective":
        bwd += layers * 4.0 * model.hidden * s
    if stage == cfg.pp - 1:
        fwd += 2.0 * model.vocab * model.hidden
        bwd += 4.0 * model.vocab * model.hidden
    return fwd * tokens / cfg.tp, bwd * tokens / cfg.tp


@dataclass(frozen=True)
class TimedCall:
    """A :class:`CommCall` with the simulated time of one call (``time_s``) and the step total."""

    call: CommCall
    time_s: float

    @property
    def total_s(self) -> float:
        """Time of all ``count`` calls."""
        return self.time_s * self.call.count

    def to_dict(self) -> dict[str, Any]:
        """The call's fields plus ``time_s`` and ``total_s``."""
        return {**self.call.to_dict(), "time_s": self.time_s, "total_s": self.total_s}


@dataclass(frozen=True)
class StepBreakdown:
    """Where one step's time goes on its slowest pipeline stage.

    ``step_time_s = compute_s + bubble_s + comm_exposed_s``. ``comm_s`` holds each kind's
    total simulated time, ``exposed_s`` the part of it on the critical path.
    """

    stage: int
    compute_s: float
    bubble_s: float
    comm_s: dict[str, float]
    exposed_s: dict[str, float]
    model_flops: float
    hardware_flops_per_device: float
    tokens: int
    n_devices: int
    peak_flops: float
    compute_efficiency: float
    overlap: str
    calls: tuple[TimedCall, ...] = field(default=())

    @property
    def comm_exposed_s(self) -> float:
        """Communication on the critical path."""
        return sum(self.exposed_s.values())

    @property
    def step_time_s(self) -> float:
        """One training step."""
        return self.compute_s + self.bubble_s + self.comm_exposed_s

    @property
    def exposed_share(self) -> float:
        """Share of the step that is exposed communication."""
        return self.comm_exposed_s / self.step_time_s if self.step_time_s > 0 else 0.0

    @property
    def tokens_per_s(self) -> float:
        """Trained tokens per second (the whole job)."""
        return self.tokens / self.step_time_s

    @property
    def mfu(self) -> float:
        """Model FLOPs utilisation: model FLOPs / (step time x devices x peak)."""
        return self.model_flops / (self.step_time_s * self.n_devices * self.peak_flops)

    def to_dict(self) -> dict[str, Any]:
        """Fields and derived figures, for ``--json``."""
        data = asdict(self)
        data["calls"] = [c.to_dict() for c in self.calls]
        data.update(
            step_time_s=self.step_time_s,
            comm_exposed_s=self.comm_exposed_s,
            exposed_share=self.exposed_share,
            tokens_per_s=self.tokens_per_s,
            mfu=self.mfu,
        )
        return data


def _time_calls(
    calls: Sequence[CommCall], topology: Any, timer: CommTimer, dtype: str, cache: dict[Any, float]
) -> list[TimedCall]:
    out = []
    for call in calls:
        key = (call.collective, call.nbytes, call.ranks, dtype)
        if key not in cache:
            cache[key] = float(
                timer(topology, call.collective, call.nbytes, ranks=list(call.ranks), dtype=dtype)
            )
        out.append(TimedCall(call, cache[key]))
    return out


def _stage_step(
    model: ModelSpec,
    cfg: ParallelConfig,
    stage: int,
    timed: list[TimedCall],
    flops_per_s: float,
    overlap: str,
) -> tuple[float, float, dict[str, float], dict[str, float], float]:
    """(compute_s, bubble_s, comm_s by kind, exposed_s by kind, hardware FLOPs) of one stage."""
    m, p, v = cfg.microbatches, cfg.pp, cfg.vpp
    fwd, bwd = stage_hardware_flops(model, cfg, stage)
    t_fwd, t_bwd = fwd / flops_per_s, bwd / flops_per_s
    t_mb = t_fwd + t_bwd
    kinds = ("tp", "ep", "pp", "dp")
    comm = {k: sum(t.total_s for t in timed if t.call.kind == k) for k in kinds}
    per_mb = {
        k: sum(t.total_s for t in timed if t.call.kind == k and t.call.per_microbatch) / m
        for k in kinds
    }
    dp_once = comm["dp"] - per_mb["dp"] * m
    exposed_mb = dict.fromkeys(kinds, 0.0)
    if overlap == "none":
        exposed_mb = dict(per_mb)
        dp_once_exposed = dp_once
    else:
        dp_once_exposed = max(0.0, dp_once - t_bwd)
        if overlap == "dp":
            exposed_mb.update({k: per_mb[k] for k in ("tp", "ep", "pp")})
            exposed_mb["dp"] = max(0.0, per_mb["dp"] - t_mb)
        else:  # "all": everything per micro-batch hides under its compute, up to the compute time
            total = sum(per_mb.values())
            hidden_excess = max(0.0, total - t_mb)
            exposed_mb = {k: (hidden_excess * per_mb[k] / total if total else 0.0) for k in kinds}
    unit = t_mb + sum(exposed_mb.values())
    bubble = (p - 1) / v * unit
    exposed = {k: exposed_mb[k] * m for k in kinds}
    exposed["dp"] += dp_once_exposed
    return m * t_mb, bubble, comm, exposed, (fwd + bwd) * m


def step_time(
    model: ModelSpec,
    cfg: ParallelConfig,
    topology: Any,
    *,
    peak_flops: float,
    compute_efficiency: float = DEFAULT_COMPUTE_EFFICIENCY,
    overlap: str = "dp",
    comm_time: CommTimer | None = None,
) -> StepBreakdown:
    """Time one training step of ``model`` under ``cfg`` on ``topology`` (its first ranks).

    Parameters
    ----------
    model, cfg
        The model and a checked parallel configuration.
    topology
        The fabric; collectives are simulated on it over the ranks of each group.
    peak_flops
        Dense BF16 peak of one accelerator, FLOP/s.
    compute_efficiency
        Fraction of ``peak_flops`` the kernels sustain (default 0.5, see
        :data:`DEFAULT_COMPUTE_EFFICIENCY`).
    overlap
        ``"none"``, ``"dp"`` or ``"all"`` (see the module docstring).
    comm_time
        ``timer(topology, collective, nbytes, ranks=..., dtype=...) -> s``; default
        :func:`default_comm_timer`.
    """
    if not 0 < compute_efficiency <= 1:
        raise UsageError(
            f"must be in (0, 1], got {compute_efficiency}", source="--compute-efficiency"
        )
    if overlap not in ("none", "dp", "all"):
        raise UsageError(f"must be none, dp or all, got {overlap!r}", source="--overlap")
    timer = comm_time if comm_time is not None else default_comm_timer()
    flops_per_s = compute_efficiency * peak_flops
    dtype = cfg.precision.comm_dtype
    cache: dict[Any, float] = {}
    stages = sorted({0, cfg.pp - 1})
    traffic = {stage: step_traffic(model, cfg, stage=stage) for stage in stages}
    prefetch = getattr(timer, "prefetch", None)
    if callable(prefetch):  # a timer that times many sizes at once (GroupTimer) gets them all
        prefetch(
            topology, [(c.collective, c.nbytes, c.ranks, dtype) for s in stages for c in traffic[s]]
        )
    best: tuple[float, int, Any, list[TimedCall]] | None = None
    for stage in stages:
        timed = _time_calls(traffic[stage], topology, timer, dtype, cache)
        result = _stage_step(model, cfg, stage, timed, flops_per_s, overlap)
        total = result[0] + result[1] + sum(result[3].values())
        if best is None or total > best[0]:
            best = (total, stage, result, timed)
    assert best is not None
    _, stage, (compute_s, bubble_s, comm, exposed, hw_flops), timed = best
    seq = cfg.seq_len(model)
    tokens = cfg.global_batch * seq
    return StepBreakdown(
        stage=stage,
        compute_s=compute_s,
        bubble_s=bubble_s,
        comm_s=comm,
        exposed_s=exposed,
        model_flops=model_flops_per_token(model, seq) * tokens,
        hardware_flops_per_device=hw_flops,
        tokens=tokens,
        n_devices=cfg.n_devices,
        peak_flops=peak_flops,
        compute_efficiency=compute_efficiency,
        overlap=overlap,
        calls=tuple(timed),
    )
