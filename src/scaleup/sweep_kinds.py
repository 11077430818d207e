"""The built-in point kinds of a sweep: one collective benchmark row, one planner result.

Each is ``f(point: dict, session=None) -> dict``, imported lazily by
:func:`scaleup.sweep_eval.evaluate_point` on whichever worker runs the point, and raises on
failure (the sweep records the error). Topologies are built once per worker process
(:func:`scaleup.sweep_eval.topology_of`); the tuning session is the batch's.
"""

from __future__ import annotations

import inspect
from typing import TYPE_CHECKING, Any

from scaleup.errors import UsageError

if TYPE_CHECKING:
    from scaleup.tune import TuneSession

__all__ = ["bench_point", "plan_point"]


def bench_point(point: dict[str, Any], session: TuneSession | None = None) -> dict[str, Any]:
    """One nccl-tests row: ``topology, collective, bytes, dtype, nranks (0 = all), algo, proto``
    (``"tuned"`` lets the tuner choose) -> :meth:`scaleup.report.BenchRow.to_dict`."""
    from scaleup.bench import bench_rows
    from scaleup.sweep_eval import topology_of
    from scaleup.tune import BenchRequest

    topology = topology_of(point["topology"], point.get("topology_text"))
    nranks = int(point.get("nranks", 0) or 0)
    algo = point.get("algo", "tuned")
    proto = point.get("proto", "tuned")
    request = BenchRequest(
        op=point["collective"],
        sizes_bytes=(int(point["bytes"]),),
        dtype=point.get("dtype", "float32"),
        ranks=nranks or None,
        algorithm=None if algo == "tuned" else algo,
        protocol=None if proto == "tuned" else proto,
    )
    rows = bench_rows(topology, request, session=session)
    row = rows[0].to_dict()
    # The spec's label ("2xdgx-h100", a file path) is what a reader grouped by; the built
    # topology's own name goes next to it.
    row["topology_name"] = row.pop("topology")
    return row


def plan_point(point: dict[str, Any], session: TuneSession | None = None) -> dict[str, Any]:
    """One planner result: ``topology, model`` and the planner's keywords (``tp, pp, dp, ep, zero,
    mbs, gbs, seq, ...``, ``overlap``, ``compute_efficiency``) -> ``PlanResult.to_dict()``
    (nested fields become dotted columns) plus ``memory_fraction`` (memory per device / HBM)."""
    from scaleup.sweep_eval import topology_of
    from scaleup.tune import CollectiveTimer
    from scaleup.workload.plan import plan

    topology = topology_of(point["topology"], point.get("topology_text"))
    kwargs = {
        k: v for k, v in point.items() if k not in ("kind", "topology", "topology_text", "model")
    }
    accepted = inspect.signature(plan).parameters
    if not any(p.kind is inspect.Parameter.VAR_KEYWORD for p in accepted.values()):
        unknown = sorted(set(kwargs) - set(accepted))
        if unknown:
            raise UsageError(
                f"the planner takes no {', '.join(unknown)}", source="plan", entry=unknown[0]
            )
    data = plan(point["model"], topology, comm_time=CollectiveTimer(session), **kwargs).to_dict()
    data.pop("model_spec", None)  # the model's shape: the catalog's, the same on every row
    data["model_name"] = data.pop("model")
    data["topology_name"] = data.pop("topology")
    hbm = data.get("hbm_per_device_bytes") or 0
    data["memory_fraction"] = data["memory_per_device_bytes"] / hbm if hbm else None
    return data
