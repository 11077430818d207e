"""A torch.distributed-shaped collective call's arguments, checked and turned into spec fields.

The reduction (:class:`ReduceOp` or its name; ``avg`` is a sum divided afterwards), roots, output
arrays of the right size, and the list form of ``all_gather``: each raises a ``UsageError`` naming
the argument, before any rank starts the collective.
"""

from __future__ import annotations

from collections.abc import Callable
from enum import StrEnum
from typing import Any

import numpy as np

from scaleup.errors import UsageError

__all__ = [
    "ReduceOp",
    "average_after",
    "check_blocked",
    "dtype_of",
    "gathered_list",
    "output_of",
    "redop_name",
    "root_of",
    "size_of",
]


class ReduceOp(StrEnum):
    """Reductions, as torch.distributed names them (strings work too). ``AVG`` is a sum divided
    by the world size afterwards, on floating dtypes (as NCCL's ``ncclAvg``)."""

    SUM = "sum"
    PROD = "prod"
    MAX = "max"
    MIN = "min"
    AVG = "avg"


def redop_name(op: ReduceOp | str) -> str:
    """The spec's reduction for ``op`` (``avg`` sums; :func:`average_after` divides)."""
    name = op.value if isinstance(op, ReduceOp) else str(op).lower()
    if name not in ("sum", "prod", "max", "min", "avg"):
        raise UsageError(f"unknown reduction {op!r}; use sum, prod, max, min or avg", source="op")
    return "sum" if name == "avg" else name


def average_after(op: ReduceOp | str, out: np.ndarray, n: int) -> Callable[[], None] | None:
    """For ``avg``: what divides the summed ``out`` by ``n`` once the collective is done."""
    if (op.value if isinstance(op, ReduceOp) else str(op).lower()) != "avg":
        return None
    if not np.issubdtype(out.dtype, np.floating) and out.dtype.kind != "V":
        raise UsageError(f"avg needs a floating dtype, got {out.dtype}", source="op")
    return lambda: np.divide(out, n, out=out, casting="unsafe")


def output_of(array: np.ndarray, output: np.ndarray | None, what: str) -> np.ndarray:
    """``output`` when given (out of place: it must be shaped like ``array``), else ``array``."""
    if output is None:
        return array
    if not isinstance(output, np.ndarray) or size_of(output) != size_of(array):
        raise UsageError(f"{what}: output must be an array the size of the input", source=what)
    return output


def dtype_of(dtype: Any) -> np.dtype:
    """A numpy dtype from scaleup's (nccl-tests') name or anything numpy takes."""
    from scaleup.collectives.spec import numpy_dtype

    return numpy_dtype(dtype) if isinstance(dtype, str) else np.dtype(dtype)


def gathered_list(
    outputs: list[np.ndarray] | tuple[np.ndarray, ...], input: np.ndarray, n: int
) -> tuple[np.ndarray, Callable[[], None]]:
    """The flat output of a list-form all_gather, and what copies it into the list after."""
    if len(outputs) != n or not all(
        isinstance(o, np.ndarray) and o.shape == input.shape and o.dtype == input.dtype
        for o in outputs
    ):
        raise UsageError(
            f"all_gather: the output list needs {n} arrays shaped like the input "
            f"({input.shape}, {input.dtype})",
            source="all_gather",
        )
    flat = np.empty((n, *input.shape), dtype=input.dtype)

    def scatter() -> None:
        for o, part in zip(outputs, flat, strict=True):
            np.copyto(o, part)

    return flat.reshape(-1), scatter


def size_of(array: np.ndarray) -> int:
    """Elements of ``array`` (the spec's count)."""
    return int(array.size)


def root_of(root: int, n: int) -> int:
    """``root`` as an int, checked to be one of the ``n`` ranks."""
    if not 0 <= int(root) < n:
        raise UsageError(f"root must be in 0..{n - 1}, got {root}", source="root")
    return int(root)


def check_blocked(small: np.ndarray, large: np.ndarray, n: int, what: str, big: str) -> None:
    """Refuse ``large`` unless it holds ``n`` blocks the size of ``small`` (gather, scatter)."""
    if size_of(large) != n * size_of(small):
        raise UsageError(
            f"{what}: {big} must have world_size * the other's elements "
            f"({n} * {size_of(small)}), got {size_of(large)}",
            source=what,
        )
