"""The collectives one training step issues, per device, with their sizes and rank groups.

Pure bookkeeping: which collective, how many bytes (nccl-tests' size column: the larger
buffer), over which ranks, how many times per step on the critical path of the fullest
pipeline stage. :mod:`scaleup.workload.step` times each distinct call on the simulator.

- **TP** (Megatron-LM, Shoeybi et al. 2019, section 3): per layer and micro-batch, 2
  all-reduces of the ``b s h`` activation in the forward pass (after attention and after the
  MLP) and 2 in the backward pass (the conjugate ``f`` operators): 4 all-reduces of
  ``b s h * 2`` bytes. With sequence parallelism (Korthikanti et al. 2022, section 4.2.2) each
  all-reduce becomes a reduce-scatter plus an all-gather of the same total size: 4 + 4. Full
  recomputation replays the forward pass, adding its 2 all-reduces (2 + 2 with SP).
- **EP**: per MoE layer and micro-batch an all-to-all to dispatch the tokens to their experts
  and one to combine them, in forward and in backward (+2 with full recomputation); each rank
  sends ``b s top_k h * 2`` bytes (divided by ``tp`` under sequence parallelism).
- **PP**: per micro-batch and virtual stage, the activation ``b s h * 2`` bytes goes to the
  next stage in forward and its gradient comes back in backward, as Megatron's scatter/gather
  optimisation sends it: ``1/tp`` of it per TP rank (Narayanan et al. 2021, section 4.1).
- **DP**: gradients of the stage's weights. ZeRO 0: one all-reduce per step (gradients are
  accumulated over micro-batches first). ZeRO 1: reduce-scatter of gradients + all-gather of
  updated weights, once per step. ZeRO 2: gradients are partitioned, so a reduce-scatter per
  micro-batch + one all-gather. ZeRO 3: weights are partitioned too: all-gather in forward and
  again in backward, and a reduce-scatter, per micro-batch. Expert weights do the same over
  their own data-parallel group (``dp / ep`` ranks).

Rank groups use the layout of :mod:`scaleup.workload.config` (TP fastest, then DP, then PP),
taking the groups of rank 0 as representative.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Literal

from scaleup.workload.config import ParallelConfig
from scaleup.workload.memory import stage_params
from scaleup.workload.models import ModelSpec

__all__ = [
    "CommCall",
    "Kind",
    "dp_group",
    "groups",
    "pp_pair",
    "step_traffic",
    "tp_bytes_per_layer",
    "tp_group",
]

Kind = Literal["tp", "ep", "pp", "dp"]


@dataclass(frozen=True)
class CommCall:
    """One kind of collective a step issues: ``count`` calls of ``nbytes`` over ``ranks``.

    ``per_microbatch`` marks calls that recur each micro-batch (TP, EP, PP, and ZeRO 2/3's),
    ``count`` being the total per step either way. ``label`` says what it carries.
    """

    kind: Kind
    collective: str
    nbytes: int
    ranks: tuple[int, ...]
    count: int
    per_microbatch: bool
    label: str

    def to_dict(self) -> dict[str, Any]:
        """Fields, with ``ranks`` shortened to its size and first ranks."""
        data = asdict(self)
        data["ranks"] = list(self.ranks[:8])
        data["nranks"] = len(self.ranks)
        return data


def tp_group(cfg: ParallelConfig, rank: int = 0) -> tuple[int, ...]:
    """Ranks of ``rank``'s TP group: ``tp`` consecutive ranks (rank 0's: ``0 .. tp-1``)."""
    first = rank - rank % cfg.tp
    return tuple(range(first, first + cfg.tp))


def dp_group(cfg: ParallelConfig, rank: int = 0) -> tuple[int, ...]:
    """Ranks of ``rank``'s DP group: stride ``tp`` within its pipeline stage."""
    t, stage = rank % cfg.tp, rank // (cfg.tp * cfg.dp)
    return tuple(t + cfg.tp * (d + cfg.dp * stage) for d in range(cfg.dp))


def pp_pair(cfg: ParallelConfig, rank: int = 0) -> tuple[int, ...]:
    """``rank`` (not of the last stage) and its next pipeline neighbour, ``tp * dp`` ranks on."""
    return (rank, rank + cfg.tp * cfg.dp)


def groups(cfg: ParallelConfig, kind: Kind) -> list[tuple[int, ...]]:
    """Every group of ``kind`` of the job (``"tp"``, ``"dp"``, ``"ep"``, ``"pp"``: pipeline
    pairs), each once, in order of its first rank: all of them are timed as rank 0's is, and
    on a regular fabric they fall into a few classes (:mod:`scaleup.workload.groups`).

    >>> groups(ParallelConfig(tp=2, dp=2), "dp")
    [(0, 2), (1, 3)]
    """
    of = {"tp": tp_group, "dp": dp_group, "ep": _ep_group_of, "pp": pp_pair}[kind]
    seen: dict[tuple[int, ...], None] = {}
    last = cfg.n_devices - (cfg.tp * cfg.dp if kind == "pp" else 0)
    for rank in range(last):
        group = of(cfg, rank)
        if len(group) > 1 and (kind == "pp" or rank == min(group)):
            seen.setdefault(group, None)
    return list(seen)


def _ep_group_of(cfg: ParallelConfig, rank: int) -> tuple[int, ...]:
    dp_ranks = dp_group(cfg, rank)
    first = dp_ranks.index(rank) // cfg.ep * cfg.ep
    return dp_ranks[first : first + cfg.ep]


def ep_group(cfg: ParallelConfig) -> tuple[int, ...]:
    """Ranks of rank 0's EP group: ``ep`` consecutive DP ranks (stride ``tp``)."""
    return tuple(cfg.tp * d for d in range(cfg.ep))


def expert_dp_group(cfg: ParallelConfig) -> tuple[int, ...]:
    """Ranks holding the same experts as rank 0: stride ``tp * ep`` within the DP group."""
    return tuple(cfg.tp * cfg.ep * d for d in range(cfg.dp // cfg.ep))


def tp_bytes_per_layer(model: ModelSpec, cfg: ParallelConfig) -> int:
    """Size of one TP collective: the layer's activation, ``b s h`` elements."""
    return cfg.mbs * cfg.seq_len(model) * model.hidden * cfg.precision.activation_bytes


def _tp_calls(model: ModelSpec, cfg: ParallelConfig, layers: int, m: int) -> list[CommCall]:
    if cfg.tp == 1:
        return []
    nbytes = tp_bytes_per_layer(model, cfg)
    passes = 3 if cfg.recompute == "full" else 2  # forward, backward (+ replayed forward)
    group = tp_group(cfg)
    if not cfg.sp:
        return [
            CommCall(
                "tp",
                "all_reduce",
                nbytes,
                group,
                2 * passes * layers * m,
                True,
                "layer activations (2 per layer per pass)",
            )
        ]
    return [
        CommCall(
            "tp",
            "all_gather",
            nbytes,
            group,
            2 * passes * layers * m,
            True,
            "sequence-parallel all-gather (2 per layer per pass)",
        ),
        CommCall(
            "tp",
            "reduce_scatter",
            nbytes,
            group,
            2 * passes * layers * m,
            True,
            "sequence-parallel reduce-scatter (2 per layer per pass)",
        ),
    ]


def _ep_calls(model: ModelSpec, cfg: ParallelConfig, layers: int, m: int) -> list[CommCall]:
    if cfg.ep == 1:
        return []
    tokens = cfg.mbs * cfg.seq_len(model) * model.top_k // (cfg.tp if cfg.sp else 1)
    nbytes = tokens * model.hidden * cfg.precision.activation_bytes
    passes = 3 if cfg.recompute == "full" else 2
    return [
        CommCall(
            "ep",
            "all_to_all",
            nbytes,
            ep_group(cfg),
            2 * passes * layers * m,
            True,
            "token dispatch + combine (2 per MoE layer per pass)",
        )
    ]


def _pp_calls(model: ModelSpec, cfg: ParallelConfig, m: int) -> list[CommCall]:
    if cfg.pp == 1:
        return []
    nbytes = tp_bytes_per_layer(model, cfg) // cfg.tp
    pair = pp_pair(cfg)
    return [
        CommCall(
            "pp",
            "send_recv",
            nbytes,
            pair,
            2 * m * cfg.vpp,
            True,
            "activation forward + gradient backward per micro-batch per virtual stage",
        )
    ]


def _dp_calls(
    group: tuple[int, ...], n_params: float, cfg: ParallelConfig, m: int, what: str
) -> list[CommCall]:
    if len(group) == 1 or n_params <= 0:
        return []
    prec = cfg.precision
    grads = int(n_params * prec.grad_bytes)
    weights = int(n_params * prec.param_bytes)
    if cfg.zero == 0:
        return [CommCall("dp", "all_reduce", grads, group, 1, False, f"{what} gradients")]
    if cfg.zero == 1:
        return [
            CommCall("dp", "reduce_scatter", grads, group, 1, False, f"{what} gradients"),
            CommCall("dp", "all_gather", weights, group, 1, False, f"{what} updated weights"),
        ]
    if cfg.zero == 2:
        return [
            CommCall(
                "dp", "reduce_scatter", grads, group, m, True, f"{what} gradients, per micro-batch"
            ),
            CommCall("dp", "all_gather", weights, group, 1, False, f"{what} updated weights"),
        ]
    return [
        CommCall(
            "dp", "all_gather", weights, group, 2 * m, True, f"{what} weights, forward + backward"
        ),
        CommCall(
            "dp", "reduce_scatter", grads, group, m, True, f"{what} gradients, per micro-batch"
        ),
    ]


def step_traffic(model: ModelSpec, cfg: ParallelConfig, *, stage: int = 0) -> list[CommCall]:
    """Every collective one device of pipeline ``stage`` issues in one step.

    Examples
    --------
    >>> from scaleup.workload.models import get_model
    >>> calls = step_traffic(get_model("llama-70b"), ParallelConfig(tp=8, sp=False))
    >>> [(c.collective, c.count) for c in calls]
    [('all_reduce', 320)]
    """
    layers = cfg.stage_layers(model)[stage]
    m = cfg.microbatches
    params = stage_params(model, cfg)[stage]
    calls = _tp_calls(model, cfg, layers, m)
    if model.is_moe:
        calls += _ep_calls(model, cfg, layers, m)
    calls += _pp_calls(model, cfg, m)
    calls += _dp_calls(dp_group(cfg), params.dense, cfg, m, "dense")
    calls += _dp_calls(expert_dp_group(cfg), params.expert, cfg, m, "expert")
    return calls
