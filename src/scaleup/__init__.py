"""scaleup: model, simulate and run memory-semantic scale-up fabrics and their collectives.

The public API, by the question it answers. Names resolve lazily, so that ``import scaleup``
(which every worker process of the runtime pays) stays cheap; this module sits above every layer
(docs/architecture.md), so a lazy lookup here hides no import arrow.

- Fabric: :class:`Topology`, :func:`resolve_topology`, :func:`load_topology`,
  :mod:`scaleup.topology.analysis`.
- Collectives: :class:`CollectiveSpec`, :class:`Schedule`, :class:`ScheduleBuilder`,
  :func:`build_schedule`, :func:`verify`.
- Cost on a fabric: :func:`simulate` (one schedule), :class:`TuneSession` (what NCCL would pick;
  one size in one call: :func:`scaleup.tune.tune`), :func:`collective_time_s` (the planner's
  question), :class:`BenchRequest` and :func:`bench_rows` (nccl-tests' table).
- Memory semantics for real: :mod:`scaleup.runtime` (``init``, ``alloc``, ``all_reduce``,
  ``launch``).
- The single larger memory: :func:`plan`.
- Sweeps: :func:`run_sweep`.
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"

_EXPORTS = {
    "Topology": "scaleup.topology",
    "resolve_topology": "scaleup.topology",
    "load_topology": "scaleup.topology",
    "save_topology": "scaleup.topology",
    "CollectiveSpec": "scaleup.collectives.spec",
    "Schedule": "scaleup.collectives.schedule",
    "ScheduleBuilder": "scaleup.collectives.build",
    "build_schedule": "scaleup.collectives.algorithms",
    "verify": "scaleup.collectives.verify",
    "simulate": "scaleup.sim",
    "collective_time_s": "scaleup.tune",
    "TuneSession": "scaleup.tune",
    "BenchRequest": "scaleup.tune",
    "bench_rows": "scaleup.bench",
    "BenchRow": "scaleup.report",
    "plan": "scaleup.workload",
    "run_sweep": "scaleup.sweep",
    "ScaleupError": "scaleup.errors",
}

__all__ = ["__version__", *sorted(_EXPORTS)]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'scaleup' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)


def __dir__() -> list[str]:
    return list(__all__)
