"""The planner: does a model fit on a fabric, and what does a training step cost there?

:func:`plan` is the one pure entry point (the CLI and design-space sweeps call it): a model
(catalog name or :class:`ModelSpec`), a topology (preset text or :class:`Topology`) and a
:class:`ParallelConfig` give a :class:`PlanResult` with the memory of the fullest device
(:mod:`~scaleup.workload.memory`), the step breakdown (:mod:`~scaleup.workload.step`, its
communication simulated on the topology) and a one-line verdict. :func:`sweep_tp` plans the
same job over TP = 1, 2, 4, ... up to the scale-up domain.

The job uses the first ``tp * pp * dp`` accelerators of the topology (fewer than it has is
allowed, more is a :class:`~scaleup.errors.UsageError`), laid out TP fastest, then DP, then PP.

>>> from scaleup.workload.plan import plan
>>> fake = lambda topo, coll, nbytes, ranks, dtype: 1e-5 + nbytes / 400e9
>>> r = plan("llama-70b", "dgx-h100", tp=8, dp=1, comm_time=fake)
>>> r.fits, r.memory.shortfall_bytes > 0
(False, True)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from scaleup.errors import UsageError
from scaleup.hardware import accelerator
from scaleup.topology import Topology, resolve_topology
from scaleup.units import GB
from scaleup.workload.config import ParallelConfig
from scaleup.workload.memory import MemoryBreakdown, memory_per_device
from scaleup.workload.models import ModelSpec, get_model
from scaleup.workload.step import (
    DEFAULT_COMPUTE_EFFICIENCY,
    CommTimer,
    StepBreakdown,
    default_comm_timer,
    step_time,
)

__all__ = ["PlanResult", "SweepRow", "plan", "sweep_tp", "tp_candidates"]


@dataclass(frozen=True)
class PlanResult:
    """Memory and step time of one (model, topology, parallel configuration)."""

    model: ModelSpec
    topology: str
    accelerator: str
    config: ParallelConfig
    memory: MemoryBreakdown
    step: StepBreakdown
    domain_size: int
    n_available: int

    @property
    def fits(self) -> bool:
        """Whether the fullest device fits in its HBM."""
        return self.memory.fits

    @property
    def verdict(self) -> str:
        """One sentence: fits or not, by how much, against device and pooled HBM."""
        mem = self.memory
        need, have = mem.total_bytes / GB, mem.hbm_bytes / GB
        pooled = (
            f"model state {mem.model_state_bytes / GB:,.0f} GB "
            f"({self.config.precision.bytes_per_param} B/param) vs pooled HBM "
            f"{mem.domain_pooled_hbm_bytes / GB:,.0f} GB per scale-up domain of {self.domain_size}"
        )
        if mem.fits:
            return (
                f"fits: {need:,.1f} GB of {have:,.1f} GB per device "
                f"({mem.headroom_bytes / GB:,.1f} GB free, micro-batch up to {mem.max_mbs}); "
                f"{pooled}"
            )
        return (
            f"does not fit: needs {need:,.1f} GB per device, has {have:,.1f} GB "
            f"(short by {mem.shortfall_bytes / GB:,.1f} GB); {pooled}"
        )

    def to_dict(self) -> dict[str, Any]:
        """Headline figures at the top level, the detail under ``config``/``memory``/``step``."""
        step, mem = self.step, self.memory
        return {
            "model": self.model.name,
            "topology": self.topology,
            "accelerator": self.accelerator,
            "params": self.model.params,
            "active_params": self.model.active_params,
            "n_devices": self.config.n_devices,
            "n_available": self.n_available,
            "domain_size": self.domain_size,
            "memory_per_device_bytes": mem.total_bytes,
            "hbm_per_device_bytes": mem.hbm_bytes,
            "fits": mem.fits,
            "shortfall_bytes": mem.shortfall_bytes,
            "max_mbs": mem.max_mbs,
            "step_time_s": step.step_time_s,
            "compute_s": step.compute_s,
            "bubble_s": step.bubble_s,
            "comm_exposed_s": step.comm_exposed_s,
            "exposed_share": step.exposed_share,
            "tokens_per_s": step.tokens_per_s,
            "mfu": step.mfu,
            "verdict": self.verdict,
            "config": self.config.to_dict(),
            "model_spec": self.model.to_dict(),
            "memory": mem.to_dict(),
            "step": step.to_dict(),
        }


def _resolve(
    model: ModelSpec | str, topology: Topology | str, model_file: Any
) -> tuple[ModelSpec, Topology]:
    spec = model if isinstance(model, ModelSpec) else get_model(model, model_file=model_file)
    topo = topology if isinstance(topology, Topology) else resolve_topology(topology)
    return spec, topo


def plan(
    model: ModelSpec | str,
    topology: Topology | str,
    config: ParallelConfig | None = None,
    *,
    compute_efficiency: float = DEFAULT_COMPUTE_EFFICIENCY,
    overlap: str = "dp",
    reserved_bytes: float = 0.0,
    model_file: Any = None,
    comm_time: CommTimer | None = None,
    **config_fields: Any,
) -> PlanResult:
    """Plan one training job: memory per device and step time on the fabric.

    Parameters
    ----------
    model
        A catalog name or alias (``"llama-70b"``) or a :class:`ModelSpec`.
    topology
        Preset text (``"gb200-nvl72"``, ``"2xdgx-h100"``, a file path) or a :class:`Topology`.
    config
        The parallel configuration; fields may also be given as keywords (``tp=8, dp=9``),
        which override those of ``config``.
    compute_efficiency
        Fraction of the accelerator's dense BF16 peak the kernels sustain (default 0.5).
    overlap
        ``"none"``, ``"dp"`` (default: DP gradients hidden under backward) or ``"all"``.
    reserved_bytes
        Memory set aside per device before the model (runtime, fragmentation).
    model_file
        A user's model TOML file searched before the catalog.
    comm_time
        Collective timer (default: the tuner's ``collective_time_s`` with a session of its own,
        :func:`~scaleup.workload.step.default_comm_timer`).

    Returns
    -------
    PlanResult
        ``to_dict()`` carries ``params``, ``memory_per_device_bytes``, ``fits``,
        ``step_time_s``, ``comm_exposed_s``, ``mfu`` and the detail.
    """
    spec, topo = _resolve(model, topology, model_file)
    cfg = (
        (config or ParallelConfig()).with_(**config_fields)
        if config_fields
        else (config or ParallelConfig())
    )
    cfg.check(spec)
    ranks = topo.accelerators
    if cfg.n_devices > len(ranks):
        raise UsageError(
            f"tp*pp*dp = {cfg.tp}*{cfg.pp}*{cfg.dp} = {cfg.n_devices} exceeds the {len(ranks)} "
            f"accelerators of {topo.name} (use an Nx<preset> topology for more)",
            source="--dp",
        )
    used = ranks[: cfg.n_devices]
    specs = [accelerator(t) for t in sorted({d.type for d in used})]
    hbm = min(a.hbm_bytes for a in specs)
    peak = min(a.peak_bf16_tflops for a in specs) * 1e12
    domain = topo.ranks_per_node
    memory = memory_per_device(
        spec, cfg, hbm_bytes=hbm, domain_size=domain, reserved_bytes=reserved_bytes
    )
    step = step_time(
        spec,
        cfg,
        topo,
        peak_flops=peak,
        compute_efficiency=compute_efficiency,
        overlap=overlap,
        comm_time=comm_time,
    )
    return PlanResult(
        model=spec,
        topology=topo.name,
        accelerator="+".join(a.name for a in specs),
        config=cfg,
        memory=memory,
        step=step,
        domain_size=domain,
        n_available=len(ranks),
    )


@dataclass(frozen=True)
class SweepRow:
    """One TP value of :func:`sweep_tp`: the plan, or why that TP cannot run."""

    tp: int
    result: PlanResult | None = None
    skipped: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """``tp``, ``skipped`` and the plan's dict (when planned)."""
        data: dict[str, Any] = {"tp": self.tp, "skipped": self.skipped}
        if self.result is not None:
            data.update(self.result.to_dict())
        return data


def tp_candidates(domain_size: int, limit: int) -> list[int]:
    """TP = 1, 2, 4, ... up to ``min(domain_size, limit)``, plus a non-power-of-2 domain size."""
    top = min(domain_size, limit)
    out = []
    tp = 1
    while tp <= top:
        out.append(tp)
        tp *= 2
    if top == domain_size and domain_size not in out:
        out.append(domain_size)
    return out


def sweep_tp(
    model: ModelSpec | str,
    topology: Topology | str,
    config: ParallelConfig | None = None,
    *,
    model_file: Any = None,
    **plan_kwargs: Any,
) -> list[SweepRow]:
    """Plan the same job over TP = 1, 2, 4, ... up to the scale-up domain.

    The number of devices ``n = tp * pp * dp`` of ``config`` is held: each row uses
    ``dp = n // (tp * pp)`` (so at most ``n`` devices). The global batch is kept when
    divisible by ``mbs * dp``, else rounded up to the next multiple (the default global batch
    is recomputed per row). A TP that cannot run (heads not divisible, ``dp < ep``...) is a
    row with ``skipped`` set.
    """
    spec, topo = _resolve(model, topology, model_file)
    base = config or ParallelConfig()
    if plan_kwargs.get("comm_time") is None:  # one tuning session for every row
        plan_kwargs = {**plan_kwargs, "comm_time": default_comm_timer()}
    rows = []
    for tp in tp_candidates(topo.ranks_per_node, base.n_devices // base.pp):
        dp = base.n_devices // (tp * base.pp)
        gbs = base.gbs
        if gbs is not None:
            unit = base.mbs * dp
            gbs = -(-gbs // unit) * unit
        cfg = base.with_(tp=tp, dp=dp, gbs=gbs)
        try:
            rows.append(SweepRow(tp, plan(spec, topo, cfg, **plan_kwargs)))
        except UsageError as error:
            rows.append(SweepRow(tp, skipped=error.message))
    return rows
