"""The parallel configuration of one training job, and the byte sizes of its numbers.

:class:`ParallelConfig` is Megatron-LM's vocabulary: tensor (``tp``), pipeline (``pp``), data
(``dp``) and expert (``ep``) parallelism, ZeRO stage, sequence parallelism, activation
recomputation, micro- and global batch, interleaved (virtual) pipeline stages. Ranks are laid
out as Megatron does by default, TP fastest, then DP, then PP::

    rank = tp_rank + tp * (dp_rank + dp * pp_rank)

so a TP group is ``tp`` consecutive ranks (inside one server when ``tp`` <= ranks per node),
a DP group is strided by ``tp`` (across servers in an ``Nx`` topology) and pipeline stages are
``tp * dp`` ranks apart. The expert-parallel group is carved out of the DP group (``ep``
consecutive DP ranks), as in Megatron-Core.

:class:`Precision` is the mixed-precision Adam recipe: bf16 weights (2 B) and gradients (2 B),
fp32 master weights (4 B) and two fp32 moments (8 B): 16 bytes per parameter, the figure of
Rajbhandari et al. 2020 (ZeRO, section 3.1: ``2 + 2 + K`` with ``K = 12``).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, replace
from typing import Any, Literal

from scaleup.errors import UsageError
from scaleup.limits import MAX_MODEL_DIM, check_at_most
from scaleup.workload.models import ModelSpec

__all__ = ["Overlap", "ParallelConfig", "Precision", "Recompute"]

Recompute = Literal["none", "selective", "full"]
Overlap = Literal["none", "dp", "all"]

#: Default number of micro-batches per step when no global batch is given: 1 without a
#: pipeline, 4 per stage with one (bubble (p-1)/(4p) < 25 %).
MICROBATCHES_PER_STAGE = 4


@dataclass(frozen=True)
class Precision:
    """Bytes per number: weights, gradients, fp32 master copy, optimizer moments, activations.

    Defaults: bf16 weights and gradients, fp32 master weights and Adam's two fp32 moments, i.e.
    ``2 + 2 + 4 + 8 = 16`` bytes per parameter. Megatron-LM keeps fp32 gradients
    (``grad_bytes=4``, 18 B/param); set it here if that is the recipe you plan for.
    """

    param_bytes: int = 2
    grad_bytes: int = 2
    master_bytes: int = 4
    moment_bytes: int = 8
    activation_bytes: int = 2

    @property
    def optimizer_bytes(self) -> int:
        """Optimizer state per parameter: master weights plus moments (12 B by default)."""
        return self.master_bytes + self.moment_bytes

    @property
    def bytes_per_param(self) -> int:
        """Model state per parameter: weights + gradients + optimizer state (16 B by default)."""
        return self.param_bytes + self.grad_bytes + self.optimizer_bytes

    @property
    def comm_dtype(self) -> str:
        """The dtype name collectives move (only its itemsize matters to the simulator)."""
        return "float16" if self.activation_bytes == 2 else "float32"


@dataclass(frozen=True)
class ParallelConfig:
    """Parallelism and batch of one training step; validated against a model by :meth:`check`.

    ``gbs`` (sequences per step) defaults to ``mbs * dp * m`` with ``m`` = 1 micro-batch without
    a pipeline and ``4 * pp`` with one. ``seq`` defaults to the model's training length.
    """

    tp: int = 1
    pp: int = 1
    dp: int = 1
    ep: int = 1
    zero: int = 0
    sp: bool = True
    recompute: Recompute = "selective"
    mbs: int = 1
    gbs: int | None = None
    seq: int | None = None
    vpp: int = 1
    precision: Precision = field(default_factory=Precision)

    @property
    def n_devices(self) -> int:
        """Accelerators the job uses: ``tp * pp * dp`` (EP lives inside DP)."""
        return self.tp * self.pp * self.dp

    @property
    def global_batch(self) -> int:
        """Sequences per step."""
        if self.gbs is not None:
            return self.gbs
        per_dp = 1 if self.pp == 1 else MICROBATCHES_PER_STAGE * self.pp
        return self.mbs * self.dp * per_dp

    @property
    def microbatches(self) -> int:
        """Micro-batches each pipeline runs per step (gradient accumulation steps)."""
        return self.global_batch // (self.mbs * self.dp)

    def seq_len(self, model: ModelSpec) -> int:
        """The sequence length used: ``seq`` or the model's."""
        return self.seq if self.seq is not None else model.seq

    def stage_layers(self, model: ModelSpec) -> list[int]:
        """Layers per pipeline stage; the first ``L mod pp`` stages get one more."""
        base, extra = divmod(model.layers, self.pp)
        return [base + (1 if i < extra else 0) for i in range(self.pp)]

    def with_(self, **changes: Any) -> ParallelConfig:
        """A copy with some fields changed."""
        return replace(self, **changes)

    def check(self, model: ModelSpec) -> None:
        """Raise :class:`UsageError` (naming the flag) when this cannot run ``model``."""
        for name in ("tp", "pp", "dp", "ep", "mbs", "vpp"):
            if getattr(self, name) < 1:
                raise UsageError(f"must be >= 1, got {getattr(self, name)}", source=f"--{name}")
        if self.zero not in (0, 1, 2, 3):
            raise UsageError(f"ZeRO stage must be 0, 1, 2 or 3, got {self.zero}", source="--zero")
        if self.recompute not in ("none", "selective", "full"):
            raise UsageError(
                f"must be none, selective or full, got {self.recompute!r}", source="--recompute"
            )
        if model.heads % self.tp:
            raise UsageError(
                f"tp={self.tp} must divide the {model.heads} attention heads of {model.name}",
                source="--tp",
            )
        if self.pp * self.vpp > model.layers:
            raise UsageError(
                f"pp*vpp={self.pp * self.vpp} exceeds the {model.layers} layers of {model.name}",
                source="--pp",
            )
        if self.ep > 1:
            if not model.is_moe:
                raise UsageError(
                    f"{model.name} is dense: expert parallelism needs an MoE model", source="--ep"
                )
            if model.experts % self.ep:
                raise UsageError(
                    f"ep={self.ep} must divide the {model.experts} experts", source="--ep"
                )
            if self.dp % self.ep:
                raise UsageError(
                    f"ep={self.ep} must divide dp={self.dp} (experts are sharded across DP ranks)",
                    source="--ep",
                )
        if self.gbs is not None and (self.gbs < 1 or self.gbs % (self.mbs * self.dp)):
            raise UsageError(
                f"global batch {self.gbs} must be a positive multiple of "
                f"mbs*dp = {self.mbs * self.dp}",
                source="--gbs",
            )
        if self.seq is not None and self.seq < 1:
            raise UsageError(f"must be >= 1, got {self.seq}", source="--seq")
        for name in ("seq", "mbs", "gbs"):  # batch sizes a float can still multiply
            value = getattr(self, name)
            if value is not None:
                check_at_most(value, MAX_MODEL_DIM, source=f"--{name}", name="MAX_MODEL_DIM")

    def to_dict(self) -> dict[str, Any]:
        """All fields plus the derived batch figures, for ``--json``."""
        data = asdict(self)
        data.update(
            n_devices=self.n_devices,
            global_batch=self.global_batch,
            microbatches=self.microbatches,
            bytes_per_param=self.precision.bytes_per_param,
        )
        return data
