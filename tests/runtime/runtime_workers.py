"""Worker functions run on every rank by the runtime tests (module level: spawn can pickle them)."""

from __future__ import annotations

import numpy as np

from scaleup import runtime as rt
from scaleup.collectives.spec import CollectiveSpec, numpy_dtype

try:  # imported once here, before the workers fork (it takes ~0.5 s per process otherwise)
    import ml_dtypes
except ImportError:
    ml_dtypes = None

REDUCING = ("all_reduce", "reduce_scatter", "reduce")
ALL = ("all_reduce", "reduce_scatter", "all_gather", "broadcast", "reduce", "all_to_all")


def dtypes() -> list[str]:
    names = ["float16", "float32", "float64", "int32", "int64"]
    return names if ml_dtypes is None else [*names, "bfloat16"]


def _arrays(spec: CollectiveSpec, dtype: np.dtype, symmetric: bool, inputs: list[np.ndarray]):
    me = rt.rank()
    make = (lambda n: rt.alloc(n, dtype)) if symmetric else (lambda n: np.zeros(n, dtype))
    inp = make(spec.input_count)
    inp[:] = inputs[me]
    if spec.collective in ("all_reduce", "broadcast", "reduce"):
        return inp, inp
    return inp, make(spec.output_count)


def run_one(
    collective: str,
    count: int,
    dtype_name: str,
    redop: str,
    symmetric: bool,
    algo: str | None = None,
    seed: int = 0,
) -> str | None:
    """Run one collective on this rank and compare with the numpy reference; None when equal."""
    n, me = rt.world_size(), rt.rank()
    root = (n - 1) if n > 1 else 0
    spec = CollectiveSpec(collective, n, count, root=root, redop=redop)
    dtype = numpy_dtype(dtype_name)
    inputs = spec.make_inputs(dtype, seed=seed)
    expected = spec.reference(inputs)[me]
    inp, out = _arrays(spec, dtype, symmetric, inputs)
    call = {
        "all_reduce": lambda: rt.all_reduce(inp, redop, algo=algo),
        "reduce": lambda: rt.reduce(inp, root, redop, algo=algo),
        "broadcast": lambda: rt.broadcast(inp, root, algo=algo),
        "reduce_scatter": lambda: rt.reduce_scatter(out, inp, redop, algo=algo),
        "all_gather": lambda: rt.all_gather(out, inp, algo=algo),
        "all_to_all": lambda: rt.all_to_all(out, inp, algo=algo),
    }[collective]
    call()
    if expected is None:
        return None
    got = out[: len(expected)].astype(np.float64)
    want = expected.astype(np.float64)
    tol = 2e-2 if dtype.itemsize == 2 else 1e-6
    if dtype.kind in "iu":
        ok = np.array_equal(out[: len(expected)], expected)
    else:
        ok = np.allclose(got, want, rtol=tol, atol=tol)
    if not ok:
        return (
            f"rank {me}: {spec.name} {dtype_name} symmetric={symmetric}: "
            f"got {got[:6]} want {want[:6]}"
        )
    return None


def sweep(
    sizes: list[int],
    dtype_names: list[str] | None = None,
    collectives=ALL,
    redops=("sum", "prod", "max", "min"),
    algo: str | None = None,
) -> list[str]:
    """Every collective x dtype x op x size; returns the failures seen on this rank."""
    rt.init()
    failures = []
    k = 0
    for size in sizes:
        for collective in collectives:
            for dtype_name in dtype_names or dtypes():
                for redop in redops if collective in REDUCING else ("sum",):
                    k += 1
                    failure = run_one(
                        collective, size, dtype_name, redop, symmetric=k % 2 == 0, algo=algo, seed=k
                    )
                    if failure:
                        failures.append(failure)
    return failures


def big_all_reduce(count: int, dtype_name: str) -> str | None:
    rt.init()
    return run_one("all_reduce", count, dtype_name, "sum", symmetric=True)


def issue_10_example(collective: str, root: int) -> list[int]:
    """Issue 10's reproduction: nvls on in-place int64 data, rank r holding 10**r."""
    rt.init()
    x = np.full(4, 10 ** rt.rank(), np.int64)
    if collective == "reduce":
        rt.reduce(x, root, algo="nvls")
    else:
        rt.all_reduce(x, algo="nvls")
    return x.tolist()
