"""Design-space sweeps: a spec file's points evaluated on dask.distributed, resumably.

One module per job; imports point one way, from the first of this list to the last (``points``
imports no other sweep module, ``schema`` only ``points``, ``kinds`` and ``tables`` only
``schema``; ``run`` imports ``evaluate``, ``kinds``, ``points``, ``progress``, ``schema`` and
``store``):

- :mod:`~scaleup.sweep.points`: what a point is (a JSON-able dict), its canonical JSON and id;
- :mod:`~scaleup.sweep.schema`: the one Arrow schema of a sweep's rows, fixed before it runs;
- :mod:`~scaleup.sweep.kinds`: the registry of point kinds (a spec names a kind, never code);
- :mod:`~scaleup.sweep.spec`: the TOML spec, parsed and validated;
- :mod:`~scaleup.sweep.expand`: a spec into its points;
- :mod:`~scaleup.sweep.evaluate`: one point into one flat row, failures as data;
- :mod:`~scaleup.sweep.tables`: rows into Arrow tables, unified and deduplicated;
- :mod:`~scaleup.sweep.store`: rows on disk as they finish (Parquet dataset or CSV);
- :mod:`~scaleup.sweep.progress`: where a sweep stands, and its ETA by cost class;
- :mod:`~scaleup.sweep.run`: :func:`run_sweep`, serial or on Dask.

Reports (plots and index pages) are rendered by the command line, :mod:`scaleup.cli.sweep_report`.
"""

from __future__ import annotations

from scaleup.sweep.evaluate import evaluate_batch, evaluate_point
from scaleup.sweep.expand import MAX_POINTS, expand_spec, size_range
from scaleup.sweep.kinds import (
    ENTRY_POINT_GROUP,
    KindFunction,
    get_kind,
    kind_names,
    register_kind,
    unregister_kind,
)
from scaleup.sweep.points import LEAD_COLUMNS, point_id
from scaleup.sweep.run import SweepProgress, SweepStopped, SweepSummary, run_sweep
from scaleup.sweep.spec import SweepSpec, load_spec, load_spec_text
from scaleup.sweep.store import ResultStore, read_provenance, read_results, read_rows

__all__ = [
    "ENTRY_POINT_GROUP",
    "LEAD_COLUMNS",
    "MAX_POINTS",
    "KindFunction",
    "ResultStore",
    "SweepProgress",
    "SweepSpec",
    "SweepStopped",
    "SweepSummary",
    "evaluate_batch",
    "evaluate_point",
    "expand_spec",
    "get_kind",
    "kind_names",
    "load_spec",
    "load_spec_text",
    "point_id",
    "read_provenance",
    "read_results",
    "read_rows",
    "register_kind",
    "run_sweep",
    "size_range",
    "unregister_kind",
]
