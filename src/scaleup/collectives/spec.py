"""Collective specifications: what each collective promises, independent of any algorithm.

A :class:`CollectiveSpec` names a collective, its world size and element count the way nccl-tests
counts them, and gives its precondition (:meth:`CollectiveSpec.make_inputs`: rank-distinct data)
and postcondition (:meth:`CollectiveSpec.reference`: the numpy oracle of every rank's output).
Algorithms build Schedules that claim a spec; the verifier replays them and compares with
``reference``.

Element counts follow nccl-tests, where ``count`` is the number of elements of the size column:

=============== ======================== ========================
collective      input elements per rank  output elements per rank
=============== ======================== ========================
all_reduce      count                    count
reduce_scatter  count (n blocks)         count // n
all_gather      count // n               count (n blocks)
all_to_all      count (n blocks)         count (n blocks)
broadcast       count                    count
reduce          count                    count (meaningful at root)
send_recv       count                    count (from rank - 1)
=============== ======================== ========================

As in nccl-tests, the blocked collectives use ``count // n`` elements per block; the rest of the
buffer is unused.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from scaleup.errors import UsageError
from scaleup.limits import MAX_ELEMENTS, MAX_RANKS, check_at_most

__all__ = [
    "BLOCKED_COLLECTIVES",
    "COLLECTIVES",
    "DTYPES",
    "PROTOCOL_NAMES",
    "REDOPS",
    "CollectiveSpec",
    "busbw_factor",
    "itemsize",
    "nccl_size_and_count",
    "numpy_dtype",
    "reduce_arrays",
    "reduce_ufunc",
]

COLLECTIVES = (
    "all_reduce",
    "reduce_scatter",
    "all_gather",
    "broadcast",
    "reduce",
    "all_to_all",
    "send_recv",
)
#: Collectives whose buffers are n blocks of ``count // n`` elements.
BLOCKED_COLLECTIVES = frozenset({"reduce_scatter", "all_gather", "all_to_all"})
REDOPS = ("sum", "prod", "max", "min")
#: NCCL's protocols as it spells them, in the order of its tables (LL, LL128, Simple): the one
#: list every layer validates protocol names against (their costs: :mod:`scaleup.sim.protocols`).
PROTOCOL_NAMES: tuple[str, ...] = ("ll", "ll128", "simple")
#: dtype names as nccl-tests prints them -> numpy names.
DTYPES = {
    "int8": "int8",
    "uint8": "uint8",
    "int32": "int32",
    "uint32": "uint32",
    "int64": "int64",
    "uint64": "uint64",
    "float16": "float16",
    "half": "float16",
    "float32": "float32",
    "float": "float32",
    "float64": "float64",
    "double": "float64",
    "bfloat16": "bfloat16",
}

_REDUCE_UFUNC = {"sum": np.add, "prod": np.multiply, "max": np.maximum, "min": np.minimum}


def _dtype_key(name: str) -> str:
    key = DTYPES.get(str(name).lower())
    if key is None:
        known = ", ".join(sorted(DTYPES))
        raise UsageError(f"unknown dtype {name!r}; known: {known}", source="dtype")
    return key


def itemsize(name: str) -> int:
    """Bytes per element of a dtype name; needs no numpy support for the type (bfloat16: 2).

    >>> itemsize("half"), itemsize("bfloat16"), itemsize("float64")
    (2, 2, 8)
    """
    key = _dtype_key(name)
    return 2 if key == "bfloat16" else int(np.dtype(key).itemsize)


def nccl_size_and_count(
    collective: str, nbytes: int, itemsize: int, nranks: int
) -> tuple[int, int, int]:
    """(printed size in bytes, printed count, CollectiveSpec count) of a size, as nccl-tests
    computes them: ``count = nbytes // itemsize``; for the blocked collectives (all_gather,
    reduce_scatter, all_to_all) the count is truncated to a multiple of ``nranks`` and the printed
    count is the per-rank block.

    >>> nccl_size_and_count("all_gather", 100, 4, 8)
    (96, 3, 24)
    >>> nccl_size_and_count("all_reduce", 100, 4, 8)
    (100, 25, 25)
    """
    count = int(nbytes) // int(itemsize)
    if collective in BLOCKED_COLLECTIVES:
        block = count // nranks
        return block * nranks * itemsize, block, block * nranks
    return count * itemsize, count, count


def numpy_dtype(name: str) -> np.dtype:
    """The numpy dtype for a dtype name (``float32``, ``half``, ``bfloat16`` where available)."""
    key = _dtype_key(name)
    if key == "bfloat16":
        try:
            import ml_dtypes  # type: ignore[import-not-found]
        except ImportError as error:
            raise UsageError(
                "dtype bfloat16 needs the ml_dtypes package (pip install ml_dtypes)", source="dtype"
            ) from error
        return np.dtype(ml_dtypes.bfloat16)
    return np.dtype(key)


def busbw_factor(collective: str, nranks: int) -> float:
    """nccl-tests' bus-bandwidth factor: busbw = algbw * factor.

    >>> busbw_factor("all_reduce", 8)
    1.75
    >>> busbw_factor("broadcast", 8)
    1.0
    """
    n = max(int(nranks), 1)
    if collective == "all_reduce":
        return 2.0 * (n - 1) / n
    if collective in BLOCKED_COLLECTIVES:
        return (n - 1) / n
    return 1.0


def reduce_ufunc(redop: str) -> np.ufunc:
    """The numpy ufunc of a reduction name (``sum`` is ``np.add``, ...)."""
    return _REDUCE_UFUNC[redop]


def reduce_arrays(arrays: list[np.ndarray], redop: str) -> np.ndarray:
    """Reduce arrays elementwise with ``redop``, in rank order (the order floats are summed in)."""
    ufunc = _REDUCE_UFUNC[redop]
    result = np.array(arrays[0], copy=True)
    for array in arrays[1:]:
        ufunc(result, array, out=result)
    return result


@dataclass(frozen=True)
class CollectiveSpec:
    """A collective over ``nranks`` ranks of ``count`` elements (nccl-tests' count).

    Parameters
    ----------
    collective
        One of :data:`COLLECTIVES`.
    nranks
        World size, 1 .. :data:`~scaleup.limits.MAX_RANKS`.
    count
        Elements, as nccl-tests counts them (see the module table), 0 ..
        :data:`~scaleup.limits.MAX_ELEMENTS`.
    root
        Root rank of broadcast and reduce.
    redop
        Reduction of all_reduce, reduce_scatter and reduce: one of :data:`REDOPS`.

    Examples
    --------
    >>> spec = CollectiveSpec("all_gather", nranks=4, count=10)
    >>> spec.block_count, spec.input_count, spec.output_count
    (2, 2, 8)
    """

    collective: str
    nranks: int
    count: int
    root: int = 0
    redop: str = "sum"

    def __post_init__(self) -> None:
        if self.collective not in COLLECTIVES:
            raise UsageError(
                f"unknown collective {self.collective!r}; known: {', '.join(COLLECTIVES)}",
                source="op",
            )
        if not isinstance(self.nranks, (int, np.integer)) or self.nranks < 1:
            raise UsageError(f"nranks must be an integer >= 1, got {self.nranks!r}", source="ranks")
        if not isinstance(self.count, (int, np.integer)) or self.count < 0:
            raise UsageError(f"count must be an integer >= 0, got {self.count!r}", source="count")
        check_at_most(self.nranks, MAX_RANKS, source="ranks", name="MAX_RANKS", what="ranks")
        check_at_most(
            self.count, MAX_ELEMENTS, source="count", name="MAX_ELEMENTS", what="elements"
        )
        if not 0 <= self.root < self.nranks:
            raise UsageError(
                f"root must be in 0..{self.nranks - 1}, got {self.root}", source="root"
            )
        if self.redop not in REDOPS:
            raise UsageError(
                f"unknown redop {self.redop!r}; known: {', '.join(REDOPS)}", source="redop"
            )

    @property
    def name(self) -> str:
        """A name that encodes the parameters, e.g. ``all_reduce(n=8, count=1024, sum)``."""
        extra = ""
        if self.collective in ("all_reduce", "reduce_scatter", "reduce"):
            extra += f", {self.redop}"
        if self.collective in ("broadcast", "reduce"):
            extra += f", root={self.root}"
        return f"{self.collective}(n={self.nranks}, count={self.count}{extra})"

    @property
    def block_count(self) -> int:
        """Elements per block for the blocked collectives (``count // nranks``), else ``count``."""
        if self.collective in BLOCKED_COLLECTIVES:
            return self.count // self.nranks
        return self.count

    @property
    def input_count(self) -> int:
        """Input buffer elements per rank."""
        if self.collective == "all_gather":
            return self.block_count
        if self.collective in ("reduce_scatter", "all_to_all"):
            return self.block_count * self.nranks
        return self.count

    @property
    def output_count(self) -> int:
        """Output buffer elements per rank."""
        if self.collective == "reduce_scatter":
            return self.block_count
        if self.collective in ("all_gather", "all_to_all"):
            return self.block_count * self.nranks
        return self.count

    @property
    def reduces(self) -> bool:
        """Whether the collective applies ``redop``."""
        return self.collective in ("all_reduce", "reduce_scatter", "reduce")

    def busbw_factor(self) -> float:
        """nccl-tests' bus-bandwidth factor for this collective and world size."""
        return busbw_factor(self.collective, self.nranks)

    def make_inputs(self, dtype: str | np.dtype = "float32", *, seed: int = 0) -> list[np.ndarray]:
        """Rank-distinct input buffers (the precondition), small values so sums stay exact-ish.

        Integers are in [-8, 8] (prod uses [1, 3]: 3**16 stays inside int32); floats are multiples
        of 1/8 in [-2, 2], exactly representable in float16 (prod uses +-1 and +-2, so products
        are powers of two: exact in every reduction order, overflowing float16 only to equal
        infinities).
        """
        np_dtype = numpy_dtype(dtype) if isinstance(dtype, str) else np.dtype(dtype)
        rng = np.random.default_rng(seed)
        n = self.input_count
        inputs = []
        for _rank in range(self.nranks):
            # draw in int8 and convert once: a 64-rank, 1M-element input is 64M values
            if self.redop == "prod" and self.reduces:
                # floats: +-1, +-2, so every product is a power of two, exact in any order
                high = 3 if np_dtype.kind in "iu" else 2
                values = rng.integers(1, high, size=n, endpoint=True, dtype=np.int8)
                if np_dtype.kind == "f":
                    values = values * rng.choice(np.array([-1, 1], dtype=np.int8), n)
                array = values.astype(np_dtype)
            elif np_dtype.kind in "iu":
                low = 0 if np_dtype.kind == "u" else -8
                array = rng.integers(low, 8, size=n, endpoint=True, dtype=np.int8).astype(np_dtype)
            else:
                array = rng.integers(-16, 16, size=n, endpoint=True, dtype=np.int8).astype(np_dtype)
                array /= np_dtype.type(8)
            inputs.append(array)
        return inputs

    def reference(self, inputs: list[np.ndarray]) -> list[np.ndarray | None]:
        """The postcondition: every rank's expected output (``None`` where it is unspecified).

        ``inputs[r]`` is rank r's input buffer (``input_count`` elements). Outputs that are equal on
        every rank (all_reduce, all_gather, broadcast) are one shared read-only array.
        """
        if len(inputs) != self.nranks:
            raise UsageError(
                f"need {self.nranks} input buffers, got {len(inputs)}", source="inputs"
            )
        n, b, c = self.nranks, self.block_count, self.collective
        if c == "all_reduce":
            return _shared([reduce_arrays(list(inputs), self.redop)] * n)
        if c == "reduce":
            outputs: list[np.ndarray | None] = [None] * n
            outputs[self.root] = reduce_arrays(list(inputs), self.redop)
            return outputs
        if c == "broadcast":
            return _shared([inputs[self.root].copy()] * n)
        if c == "reduce_scatter":
            total = reduce_arrays([x[: n * b] for x in inputs], self.redop)
            return [total[r * b : (r + 1) * b].copy() for r in range(n)]
        if c == "all_gather":
            return _shared([np.concatenate([x[:b] for x in inputs])] * n)
        if c == "all_to_all":
            return [
                np.concatenate([inputs[p][r * b : (r + 1) * b] for p in range(n)]) for r in range(n)
            ]
        # send_recv: every rank sends its buffer to rank + 1, receives from rank - 1 (nccl-tests).
        return [inputs[(r - 1) % n].copy() for r in range(n)]


def _shared(outputs: list[np.ndarray]) -> list[np.ndarray | None]:
    """Expected outputs that are the same on every rank share one read-only array."""
    if outputs:
        outputs[0].flags.writeable = False
    return list(outputs)
