"""Fabrics side by side: the facts, the collectives' bus bandwidth and a model's step on each.

:func:`compare` answers ``scaleup compare TOPO TOPO ...`` with one :class:`FabricRow` per fabric:

- the topology facts of ``scaleup topo show`` (:mod:`scaleup.topology.analysis`): accelerators,
  the scale-up domain (accelerators per node), per-accelerator scale-up bandwidth, pooled HBM,
  bisection;
- ``busbw`` per collective and size, the rows ``scaleup bench`` prints for the same fabric and
  size (:func:`scaleup.bench.bench_rows`; one :class:`~scaleup.tune.TuneSession` for every
  fabric, collective and the planner, so compiled structures are shared);
- a tensor-parallel training step of a catalog model (:func:`scaleup.workload.plan.plan`):
  TP = the scale-up domain, at most :data:`MAX_DEFAULT_TP` (or ``tp=``), DP filling the fabric;
  a configuration the planner refuses (heads not divisible, too few accelerators) is a
  :class:`ModelCell` with ``skipped`` set, one that does not fit in HBM has ``fits`` false.

>>> rows = compare(["dgx-h100"], sizes_bytes=(1 << 20,), collectives=("all_reduce",), model=None)
>>> rows[0].accelerators, rows[0].domain_size, rows[0].pooled_memory_bytes // 10**9
(8, 8, 640)
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from scaleup.errors import UsageError
from scaleup.report import BenchRow
from scaleup.units import GIB, MIB, format_bytes

if TYPE_CHECKING:
    from scaleup.calibrate.profile import Profile
    from scaleup.topology import Topology
    from scaleup.tune import TuneSession
    from scaleup.workload.groups import GroupTimer
    from scaleup.workload.models import ModelSpec

__all__ = [
    "DEFAULT_COLLECTIVES",
    "DEFAULT_MODEL",
    "DEFAULT_SIZES",
    "MAX_DEFAULT_TP",
    "FabricRow",
    "ModelCell",
    "compare",
]

#: Message sizes compared by default: latency-, middle- and bandwidth-bound.
DEFAULT_SIZES: tuple[int, ...] = (MIB, 64 * MIB, GIB)
#: Collectives compared by default.
DEFAULT_COLLECTIVES: tuple[str, ...] = ("all_reduce", "all_gather", "all_to_all")
#: The planner's example model (docs/planner.md); its state fits 8 accelerators of 80 GB.
DEFAULT_MODEL = "llama-8b"
#: Default TP: the scale-up domain, at most 8 (Megatron's usual TP; a power of two that divides
#: the catalog models' heads, where a 72-way NVL72 domain would not).
MAX_DEFAULT_TP = 8

#: ``progress(text)`` before each slow step.
Progress = Callable[[str], None]


@dataclass(frozen=True)
class ModelCell:
    """A tensor-parallel training step of ``model`` on one fabric, or why it cannot run."""

    model: str
    tp: int
    dp: int = 0
    fits: bool = False
    memory_per_device_bytes: float = 0.0
    hbm_per_device_bytes: float = 0.0
    step_time_s: float | None = None
    comm_share: float | None = None
    skipped: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """Every field; ``comm_share`` is the exposed communication's share of the step."""
        return {
            "model": self.model,
            "tp": self.tp,
            "dp": self.dp,
            "fits": self.fits,
            "memory_per_device_bytes": self.memory_per_device_bytes,
            "hbm_per_device_bytes": self.hbm_per_device_bytes,
            "step_time_s": self.step_time_s,
            "comm_share": self.comm_share,
            "skipped": self.skipped,
        }


@dataclass(frozen=True)
class FabricRow:
    """One fabric of :func:`compare`: facts, busbw per collective and size, the model's step."""

    label: str
    name: str
    accelerator_types: tuple[str, ...]
    accelerators: int
    domain_size: int
    per_accelerator_gb_per_s: float
    pooled_memory_bytes: int
    bisection_gb_per_s: float
    bisection_exact: bool
    sizes_bytes: tuple[int, ...] = ()
    busbw: dict[str, list[BenchRow]] = field(default_factory=dict)
    model: ModelCell | None = None

    def busbw_gb_per_s(self, collective: str, size_bytes: int) -> float:
        """The busbw of ``collective`` at the requested size ``size_bytes`` (GB/s); the row's
        ``bytes`` is nccl-tests' size, rounded down to whole elements and blocks."""
        rows = self.busbw[collective]
        return rows[self.sizes_bytes.index(size_bytes)].busbw_gb_per_s

    def busbw_table(self) -> dict[str, dict[str, float]]:
        """``{collective: {requested size ("1M"): busbw GB/s}}``."""
        return {
            op: {
                format_bytes(size): row.busbw_gb_per_s
                for size, row in zip(self.sizes_bytes, rows, strict=True)
            }
            for op, rows in self.busbw.items()
        }

    def to_dict(self, *, detail: bool = True) -> dict[str, Any]:
        """The facts, ``busbw_gb_per_s`` by collective and size, the model cell and (``detail``)
        the bench rows under ``bench``."""
        data: dict[str, Any] = {
            "label": self.label,
            "topology": self.name,
            "accelerator_types": list(self.accelerator_types),
            "accelerators": self.accelerators,
            "domain_size": self.domain_size,
            "per_accelerator_gb_per_s": self.per_accelerator_gb_per_s,
            "pooled_memory_bytes": self.pooled_memory_bytes,
            "bisection_gb_per_s": self.bisection_gb_per_s,
            "bisection_exact": self.bisection_exact,
            "busbw_gb_per_s": self.busbw_table(),
            "model": self.model.to_dict() if self.model is not None else None,
        }
        if detail:
            data["bench"] = {op: [r.to_dict() for r in rows] for op, rows in self.busbw.items()}
        return data


def compare(
    topologies: Sequence[Topology | str],
    *,
    sizes_bytes: Sequence[int] = DEFAULT_SIZES,
    collectives: Sequence[str] = DEFAULT_COLLECTIVES,
    model: str | None = DEFAULT_MODEL,
    tp: int | None = None,
    session: TuneSession | None = None,
    progress: Progress | None = None,
    profile: Profile | None = None,
) -> list[FabricRow]:
    """Compare fabrics side by side.

    Parameters
    ----------
    topologies
        Topologies or anything ``resolve_topology`` accepts (labels: the text given, or the
        topology's name); at least one, no label twice.
    sizes_bytes
        Message sizes of the busbw columns (nccl-tests' sizes: rounded down to whole elements).
    collectives
        Collectives timed at each size.
    model
        Catalog model (or alias) planned on each fabric; None: no model cell.
    tp
        Tensor-parallel size (default: the domain, at most :data:`MAX_DEFAULT_TP`).
    session
        The tuning session (default a new one, shared by every fabric and the planner).
    progress
        ``progress(text)`` before each slow step.
    profile
        A calibration profile (``scaleup calibrate``) applied to every fabric; None: none.

    Returns
    -------
    list[FabricRow]
        One row per fabric, in the order given.
    """
    # Imported here, not above: every command of the CLI imports this module for its defaults
    # (--sizes, --model); the tuner, simulator and planner load when fabrics are compared.
    from scaleup.bench import bench_rows
    from scaleup.calibrate.profile import apply_profile
    from scaleup.topology import Topology, resolve_topology
    from scaleup.topology.analysis import bisection, per_accelerator_gb_per_s, pooled_memory_bytes
    from scaleup.tune import BenchRequest, TuneSession
    from scaleup.workload.groups import GroupTimer
    from scaleup.workload.models import get_model

    if not topologies:
        raise UsageError("no topology given", source="topologies")
    if tp is not None and tp < 1:
        raise UsageError(f"must be >= 1, got {tp}", source="tp")
    labels = [t.name if isinstance(t, Topology) else str(t) for t in topologies]
    if len(set(labels)) != len(labels):
        raise UsageError("the same fabric is listed twice", source="topologies")
    requests = [BenchRequest(op=op, sizes_bytes=tuple(sizes_bytes)) for op in collectives]
    session = session or TuneSession()
    timer = GroupTimer(session)
    say = progress or (lambda _text: None)
    spec = get_model(model) if model is not None else None  # an unknown model fails first
    topos = [
        apply_profile(t if isinstance(t, Topology) else resolve_topology(t), profile)
        for t in topologies
    ]
    rows = []
    for i, (label, topo) in enumerate(zip(labels, topos, strict=True)):
        where = f"{label} ({i + 1}/{len(topos)})"
        say(f"facts of {where}")
        bisect, exact = bisection(topo)
        busbw = {}
        for request in requests:
            say(f"{request.op} on {where}")
            busbw[request.op] = bench_rows(topo, request, session=session)
        cell = None
        if spec is not None:
            say(f"{spec.name} on {where}")
            cell = _model_cell(spec, topo, tp, timer)
        rows.append(
            FabricRow(
                label=label,
                name=topo.name,
                accelerator_types=tuple(sorted({d.type for d in topo.accelerators})),
                accelerators=len(topo.accelerators),
                domain_size=topo.ranks_per_node,
                per_accelerator_gb_per_s=per_accelerator_gb_per_s(topo),
                pooled_memory_bytes=pooled_memory_bytes(topo),
                bisection_gb_per_s=bisect,
                bisection_exact=exact,
                sizes_bytes=tuple(requests[0].sizes_bytes) if requests else (),
                busbw=busbw,
                model=cell,
            )
        )
    return rows


def _model_cell(model: ModelSpec, topo: Topology, tp: int | None, timer: GroupTimer) -> ModelCell:
    """Plan ``model`` with TP ``tp`` (default: the domain, at most 8) and DP filling ``topo``."""
    from scaleup.workload.config import ParallelConfig
    from scaleup.workload.plan import plan

    n_tp = tp if tp is not None else min(topo.ranks_per_node, MAX_DEFAULT_TP)
    dp = max(1, len(topo.accelerators) // n_tp)
    try:
        result = plan(model, topo, ParallelConfig(tp=n_tp, dp=dp), comm_time=timer)
    except UsageError as error:
        return ModelCell(model=model.name, tp=n_tp, dp=dp, skipped=error.message)
    return ModelCell(
        model=model.name,
        tp=n_tp,
        dp=dp,
        fits=result.fits,
        memory_per_device_bytes=result.memory.total_bytes,
        hbm_per_device_bytes=result.memory.hbm_bytes,
        step_time_s=result.step.step_time_s,
        comm_share=result.step.exposed_share,
    )
