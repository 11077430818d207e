"""The training planner: does a model fit on a fabric, and what does a step cost there?

- :mod:`~scaleup.workload.models`: the model catalog (``models.toml``) and user model files;
- :mod:`~scaleup.workload.config`: the parallel configuration and mixed-precision byte sizes;
- :mod:`~scaleup.workload.memory`: memory per device (weights, gradients, optimizer, activations);
- :mod:`~scaleup.workload.traffic`: the collectives a step issues, with sizes and rank groups;
- :mod:`~scaleup.workload.step`: FLOPs, simulated communication, overlap, bubble, MFU;
- :mod:`~scaleup.workload.plan`: :func:`plan` and :func:`sweep_tp`, the entry points.
"""

from __future__ import annotations

from scaleup.workload.config import ParallelConfig, Precision
from scaleup.workload.memory import MemoryBreakdown, memory_per_device
from scaleup.workload.models import ModelSpec, get_model, list_models, load_model_file
from scaleup.workload.plan import PlanResult, SweepRow, plan, sweep_tp
from scaleup.workload.step import DEFAULT_COMPUTE_EFFICIENCY, StepBreakdown, step_time
from scaleup.workload.traffic import CommCall, step_traffic

__all__ = [
    "DEFAULT_COMPUTE_EFFICIENCY",
    "CommCall",
    "MemoryBreakdown",
    "ModelSpec",
    "ParallelConfig",
    "PlanResult",
    "Precision",
    "StepBreakdown",
    "SweepRow",
    "get_model",
    "list_models",
    "load_model_file",
    "memory_per_device",
    "plan",
    "step_time",
    "step_traffic",
    "sweep_tp",
]
