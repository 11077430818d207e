"""What the vendor library would do: the enable rules, the candidates and the search.

Between the simulator (which times one schedule on one topology) and its users (``scaleup
bench``, the planner, sweeps):

- :mod:`~scaleup.tune.request`: :class:`BenchRequest`, one validated question;
- :mod:`~scaleup.tune.rules`: NCCL's enable rules and the candidates they leave;
- :mod:`~scaleup.tune.channels`: channel counts and how lanes are laid on the fabric;
- :mod:`~scaleup.tune.checks`: the timed structures are verified first;
- :mod:`~scaleup.tune.search`: :class:`TuneSession`, which owns networks, compiled schedules and
  checked structures and picks a candidate (as NCCL's cost model does, RCCL's on AMD nodes,
  :mod:`~scaleup.tune.nccl_model`, or the fastest simulated), explained;
- :func:`tune` and :func:`collective_time_s`: the one-call entry points.
"""

from __future__ import annotations

from scaleup.tune.channels import MAX_CHANNELS, GroupShape, channel_counts
from scaleup.tune.checks import REFERENCE_BLOCKS, VERIFY_MAX_OPERANDS, VERIFY_MAX_OPS, CheckedSet
from scaleup.tune.collective_time import CollectiveTimer, collective_time_s
from scaleup.tune.request import BenchRequest, nccl_sizes
from scaleup.tune.rules import (
    CHUNK_BYTES,
    MAX_PIPELINE_CHUNKS,
    NCCL_ALGORITHMS,
    Candidate,
    candidates,
    chunks_for,
    enabled_algorithms,
    enabled_protocols,
)
from scaleup.tune.search import TunedChoice, TuneSession
from scaleup.tune.tuner import tune

__all__ = [
    "CHUNK_BYTES",
    "MAX_CHANNELS",
    "MAX_PIPELINE_CHUNKS",
    "NCCL_ALGORITHMS",
    "REFERENCE_BLOCKS",
    "VERIFY_MAX_OPERANDS",
    "VERIFY_MAX_OPS",
    "BenchRequest",
    "Candidate",
    "CheckedSet",
    "CollectiveTimer",
    "GroupShape",
    "TuneSession",
    "TunedChoice",
    "candidates",
    "channel_counts",
    "chunks_for",
    "collective_time_s",
    "enabled_algorithms",
    "enabled_protocols",
    "nccl_sizes",
    "tune",
]
