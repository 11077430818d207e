"""The runtime correctness matrix, run inside every rank of one launch.

Every registered algorithm (and a few parameter variants) x every collective it offers that the
runtime API exposes x every root x dtype x reduction, on this launch's transport and world size,
against the numpy reference of :class:`~scaleup.collectives.spec.CollectiveSpec`. One launch runs
all cases (a launch per case would cost more than the cases). Integer inputs are chosen so that
every result is exact and every rank's contribution stays visible: ``(i + 1) * 1024**r`` with
alternating signs (sum, max, min), and a distinct prime per rank raised to 1..3 (prod). reduce's
non-root ranks must get their array back unchanged (the runtime API's promise).

Run as a script under ``mpiexec -n N`` for the mpi transport: exit status 1 if any case fails.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Any

import numpy as np

from scaleup import runtime as rt
from scaleup.collectives.algorithms import ALGORITHMS, supports
from scaleup.collectives.spec import COLLECTIVES, CollectiveSpec
from scaleup.runtime.schedules import parse_algorithm

#: The collectives the runtime API offers (send_recv is not one).
RUNTIME_COLLECTIVES = tuple(c for c in COLLECTIVES if c != "send_recv")
_PRIMES = (2, 3, 5, 7, 11, 13, 17)
_DIGIT = 1024  # (i + 1) < 1024: the rank digits of a sum never carry into each other


@dataclass(frozen=True)
class Case:
    """One collective call of the matrix."""

    algo: str  # name or name:key=value,...
    collective: str
    count: int
    root: int
    redop: str
    dtype: str
    symmetric: bool

    def __str__(self) -> str:
        where = "symmetric" if self.symmetric else "ordinary"
        return (
            f"{self.algo} {self.collective} count={self.count} root={self.root} "
            f"{self.redop} {self.dtype} {where}"
        )


def variants(name: str, nranks: int, extra: bool) -> list[str]:
    """The ``algo=`` strings an algorithm is run with at world size ``nranks`` (``extra``: the
    channels/chunks variant the base matrix leaves out)."""
    if extra:
        return [] if name == "hierarchical" else [f"{name}:channels=2,chunks=2"]
    if name == "hierarchical":  # every node size that divides the world (1 node .. n nodes)
        return [f"hierarchical:ranks_per_node={g}" for g in range(1, nranks + 1) if nranks % g == 0]
    if name == "direct":
        return [name, "direct:shot=2"]  # the matrix's sizes are all one-shot under shot=auto
    return [name]


def cases(nranks: int, extra: bool = False) -> list[Case]:
    """Every case of the base matrix for one world size; ``extra``: the cases only the ``slow``
    run adds (a third count for the base variants, and the channels/chunks variants at all three
    counts), none of them a base case."""
    base_counts = [1, 3 * nranks + 1]
    out: list[Case] = []
    for name, algorithm in ALGORITHMS.items():
        base_runs = variants(name, nranks, False)
        runs = [(algo, [7 * nranks] if extra else base_counts) for algo in base_runs]
        if extra:
            runs += [(algo, [*base_counts, 7 * nranks]) for algo in variants(name, nranks, True)]
        for algo, counts in runs:
            params = parse_algorithm(algo)[1]
            for collective in algorithm.collectives:
                if collective not in RUNTIME_COLLECTIVES:
                    continue
                if not supports(name, collective, nranks, **params):
                    continue
                reduces = collective in ("all_reduce", "reduce_scatter", "reduce")
                ops = ("sum", "prod", "max", "min") if reduces else ("sum",)
                kinds = [("int64", op) for op in ops]
                kinds.append(("float32", "sum"))
                roots = range(nranks) if collective in ("broadcast", "reduce") else [0]
                for count in counts:
                    for root in roots:
                        for dtype, redop in kinds:
                            symmetric = len(out) % 2 == 1
                            out.append(Case(algo, collective, count, root, redop, dtype, symmetric))
    return out


def inputs_for(spec: CollectiveSpec, dtype: np.dtype) -> list[np.ndarray]:
    """Every rank's input; exact integer results with each rank's contribution visible."""
    if dtype.kind == "f":
        return spec.make_inputs(dtype, seed=spec.count + spec.root)
    i = np.arange(spec.input_count, dtype=np.int64)
    out = []
    for r in range(spec.nranks):
        if spec.reduces and spec.redop == "prod":
            value = _PRIMES[r] ** (1 + (i + r) % 3) * np.where((i * (r + 1)) % 2 == 1, -1, 1)
        else:
            value = (i + 1) * _DIGIT**r * np.where((i + r) % 2 == 1, -1, 1)
        out.append(value.astype(dtype))
    return out


class _Pools:
    """Symmetric arrays allocated once per dtype; cases use their leading elements."""

    def __init__(self, size: int) -> None:
        self.size = size
        self.arrays: dict[str, tuple[np.ndarray, np.ndarray]] = {}

    def get(self, dtype: str, n_in: int, n_out: int) -> tuple[np.ndarray, np.ndarray]:
        if dtype not in self.arrays:  # the same order on every rank: cases are identical
            self.arrays[dtype] = (rt.alloc(self.size, dtype), rt.alloc(self.size, dtype))
        inp, out = self.arrays[dtype]
        return inp[:n_in], out[:n_out]


def run_case(case: Case, pools: _Pools) -> str | None:
    """Run one case on this rank; a line describing the first mismatch, or None."""
    n, me = rt.world_size(), rt.rank()
    spec = CollectiveSpec(case.collective, n, case.count, root=case.root, redop=case.redop)
    dtype = np.dtype(case.dtype)
    inputs = inputs_for(spec, dtype)
    expected = spec.reference(inputs)[me]
    if expected is None:  # reduce's non-roots keep their array
        expected = inputs[me]
    in_place = case.collective in ("all_reduce", "broadcast", "reduce")
    if case.symmetric:
        inp, out = pools.get(case.dtype, spec.input_count, spec.output_count)
    else:
        inp, out = np.empty(spec.input_count, dtype), np.empty(spec.output_count, dtype)
    inp[:] = inputs[me]
    if in_place:
        out = inp
    {
        "all_reduce": lambda: rt.all_reduce(inp, case.redop, algo=case.algo),
        "reduce": lambda: rt.reduce(inp, case.root, case.redop, algo=case.algo),
        "broadcast": lambda: rt.broadcast(inp, case.root, algo=case.algo),
        "reduce_scatter": lambda: rt.reduce_scatter(out, inp, case.redop, algo=case.algo),
        "all_gather": lambda: rt.all_gather(out, inp, algo=case.algo),
        "all_to_all": lambda: rt.all_to_all(out, inp, algo=case.algo),
    }[case.collective]()
    got = out[: len(expected)]
    if dtype.kind == "f":
        bad = np.flatnonzero(~np.isclose(got, expected, rtol=1e-6, atol=1e-6))
    else:
        bad = np.flatnonzero(got != expected)
    if not len(bad):
        return None
    k = int(bad[0])
    return (
        f"n={n} rank {me}: {case}: {len(bad)} wrong elements, first [{k}] = {got[k]!r}, "
        f"expected {expected[k]!r}"
    )


def run_matrix(extra: bool = False) -> dict[str, Any]:
    """The base (or ``extra``) cases for this world size on this rank: failures, cases run and
    algorithms covered."""
    rt.init()
    todo = cases(rt.world_size(), extra)
    pools = _Pools(max(c.count for c in todo))
    failures = [f for f in (run_case(c, pools) for c in todo) if f is not None]
    names = sorted({parse_algorithm(c.algo)[0] for c in todo})
    return {"failures": failures, "cases": len(todo), "algorithms": names}


def main() -> int:
    """Under mpiexec: the matrix on the mpi transport; failures on stderr, exit status 1."""
    rt.init(transport="mpi")
    result = run_matrix(extra="--extra" in sys.argv)
    rt.shutdown()
    for failure in result["failures"][:20]:
        print(failure, file=sys.stderr)
    return 1 if result["failures"] else 0


if __name__ == "__main__":
    sys.exit(main())
