"""One benchmark request, validated once: what the simulator path, the runtime path and the
sweeps all take.

A :class:`BenchRequest` is nccl-tests' command line in library words: the collective (``op``),
the sizes, ``dtype``, ``redop``, ``root``, how many ranks, and the overrides that pin the tuner
(``algorithm``, ``protocol``, ``channels``, ``family``). It is frozen and checks every field on
construction, raising a :class:`~scaleup.errors.UsageError` whose ``source`` is the field's
name; the command line maps its flags to these fields (and back, for errors) in one place. What
depends on the fabric (ranks and root within its accelerators) is checked by
:meth:`BenchRequest.nranks_on`.

:func:`nccl_sizes` is nccl-tests' size loop (``-b``, ``-e``, ``-f``).
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Sequence
from dataclasses import dataclass

from scaleup.collectives.algorithms import ALGORITHMS, algorithms_for
from scaleup.collectives.spec import (
    COLLECTIVES,
    PROTOCOL_NAMES,
    REDOPS,
    itemsize,
    nccl_size_and_count,
)
from scaleup.errors import UsageError
from scaleup.limits import MAX_CHANNELS, check_at_most
from scaleup.topology.model import Topology
from scaleup.tune.nccl_buffers import NcclBuffers
from scaleup.tune.rules import Candidate, check_family
from scaleup.units import GIB

__all__ = [
    "BENCH_REDOPS",
    "MAX_SIZES",
    "QUICKSTART_SIZES",
    "REDUCING",
    "ROOTED",
    "SELECTIONS",
    "BenchRequest",
    "nccl_sizes",
]

#: Collectives with a root (nccl-tests prints -1 in the root column for the others).
ROOTED = frozenset({"broadcast", "reduce"})
#: Collectives that reduce (nccl-tests prints "none" in the redop column for the others).
REDUCING = frozenset({"all_reduce", "reduce_scatter", "reduce"})
#: nccl-tests' reductions (``-o``): the spec's plus ``avg``, which NCCL runs as a sum with a
#: local scale (``ncclDevPreMulSum`` on floats, ``ncclDevSumPostDiv`` on integers).
BENCH_REDOPS = (*REDOPS, "avg")
#: How the tuner picks (:attr:`BenchRequest.selection`): by simulated time, or as NCCL's cost
#: model does.
SELECTIONS = ("fastest", "nccl-model")
#: Safety cap on the number of sizes of one sweep.
MAX_SIZES = 4096


def nccl_sizes(min_bytes: int, max_bytes: int, factor: float = 2) -> list[int]:
    """nccl-tests' size loop: ``min_bytes``, times ``factor``, while <= ``max_bytes``.

    >>> nccl_sizes(8, 64, 2)
    [8, 16, 32, 64]
    """
    if min_bytes < 0 or max_bytes < 0:
        raise UsageError("sizes must be >= 0", source="min_bytes/max_bytes")
    if min_bytes > max_bytes:
        raise UsageError(
            f"min_bytes ({min_bytes}) must not exceed max_bytes ({max_bytes})",
            source="min_bytes/max_bytes",
        )
    if not 1 < factor < math.inf:
        raise UsageError(f"factor must be a finite number > 1, got {factor}", source="factor")
    out = [int(min_bytes)]
    size = float(min_bytes)
    while True:
        size = size * factor if size > 0 else 1.0
        if size >= max_bytes + 1:  # int(size) > max_bytes, before int(): size may be inf
            break
        nxt = int(size)
        if nxt != out[-1]:
            out.append(nxt)
        if len(out) > MAX_SIZES:
            raise UsageError(
                f"more than {MAX_SIZES} sizes; raise factor or narrow min_bytes..max_bytes",
                source="factor",
            )
    return out


#: The Quickstart sweep: all_reduce_perf -b 8 -e 8G -f 2.
QUICKSTART_SIZES = tuple(nccl_sizes(8, 8 * GIB, 2))


def _known(value: str, known: tuple[str, ...] | list[str], what: str, field: str) -> None:
    if value not in known:
        raise UsageError(f"unknown {what} {value!r}; known: {', '.join(known)}", source=field)


@dataclass(frozen=True)
class BenchRequest:
    """nccl-tests' question, validated on construction (see the module docstring).

    Attributes
    ----------
    op
        The collective (:data:`~scaleup.collectives.spec.COLLECTIVES`).
    sizes_bytes
        nccl-tests sizes asked for (the size column before its truncation to whole elements and
        blocks); default 8 B .. 8 GiB, x2.
    dtype, redop, root
        nccl-tests' ``-d``, ``-o``, ``-r``. ``redop`` only applies to reducing collectives and
        ``root`` to broadcast and reduce (see :attr:`spec_redop`, :attr:`spec_root`); ``redop``
        may be ``avg`` (:data:`BENCH_REDOPS`): timed as a sum, and NVLS is not offered for it,
        as NCCL's switch kernels take no pre-multiplied sum (:attr:`nccl_redop`).
    ranks
        Use the first ``ranks`` accelerators (default all); the process count of a runtime run.
    algorithm, protocol, channels
        Pin the tuner to one algorithm, protocol, channel count (``--algo``, ``--proto``,
        ``--channels``).
    algorithms, protocols, min_channels, max_channels
        Narrow the tuner as NCCL's environment does (:mod:`scaleup.tune.nccl_env`): the
        algorithms and protocols allowed (None: all), and the range the channel counts are
        clamped into. The pins above take precedence.
    ll128_c2c
        ``NCCL_LL128_C2C``: LL128 may run across servers of accelerators hosted over
        NVLink-C2C (default True, NCCL 2.27 and later; False reproduces NCCL 2.26 and earlier,
        :func:`scaleup.tune.rules.enabled_protocols`). A library rule, not a pin.
    net_tuner
        The network plugin's tuner runs where it applies (default True: aws-ofi-nccl's region
        tuner on p5 / p5e, :mod:`scaleup.tune.ofi_tuner`; ``NCCL_TUNER_PLUGIN=none`` is False).
        It moves the selection ``nccl-model`` only.
    buffers
        NCCL's buffer and chunk sizes as its environment sets them (``NCCL_BUFFSIZE``,
        ``NCCL_P2P_NET_CHUNKSIZE``, ``NCCL_NVLS_CHUNKSIZE``, ``NCCL_NVLSTREE_MAX_CHUNKSIZE``;
        :class:`~scaleup.tune.nccl_buffers.NcclBuffers`), over what the EFA network plugin sets
        on AWS instances (:mod:`scaleup.tune.ofi_env`); unset, NCCL's own rules. They change
        the steps pipelines move, not the candidates.
    family
        Algorithms the tuner picks from: ``nccl`` (what nccl-tests would print) or ``all``.
    selection
        How the tuner picks among them (:data:`SELECTIONS`): ``nccl-model`` (the default)
        picks the (algorithm, protocol) of least time in NCCL's own cost model
        (:mod:`scaleup.tune.nccl_model`; RCCL's own model on AMD nodes RCCL has a node model
        for), as the library does, and simulates that pick on its channel count; where the
        model does not apply (part of an AMD node, ``family="all"``, collectives and
        algorithms NCCL does not model) it falls back to ``fastest``, which simulates every
        candidate and keeps the least time.
    """

    op: str = "all_reduce"
    sizes_bytes: tuple[int, ...] = QUICKSTART_SIZES
    dtype: str = "float32"
    redop: str = "sum"
    root: int = 0
    ranks: int | None = None
    algorithm: str | None = None
    protocol: str | None = None
    channels: int | None = None
    family: str = "nccl"
    algorithms: frozenset[str] | None = None
    protocols: frozenset[str] | None = None
    min_channels: int | None = None
    max_channels: int | None = None
    selection: str = "nccl-model"
    ll128_c2c: bool = True
    net_tuner: bool = True
    buffers: NcclBuffers = NcclBuffers()

    @property
    def pinned(self) -> bool:
        """Whether the user narrowed the tuner (flags or NCCL_* environment): the library's own
        pre-tuner choices (RCCL's MSCCL) then stand aside for what was asked."""
        fields = (self.algorithm, self.protocol, self.channels, self.algorithms, self.protocols)
        limits = (self.min_channels, self.max_channels)
        return self.family != "nccl" or any(v is not None for v in (*fields, *limits))

    def __post_init__(self) -> None:
        _known(self.op, COLLECTIVES, "op", "op")
        sizes = tuple(self.sizes_bytes)
        if not sizes:
            raise UsageError("sizes_bytes must hold at least one size", source="sizes_bytes")
        if any(not _is_int(s) or s < 0 for s in sizes):
            raise UsageError(
                f"sizes must be integers >= 0, got {list(sizes)}", source="sizes_bytes"
            )
        object.__setattr__(self, "sizes_bytes", tuple(int(s) for s in sizes))
        itemsize(self.dtype)  # raises for an unknown dtype name
        _known(self.redop, BENCH_REDOPS, "redop", "redop")
        if not _is_int(self.root) or self.root < 0:
            raise UsageError(f"root must be an integer >= 0, got {self.root!r}", source="root")
        if self.ranks is not None and (not _is_int(self.ranks) or self.ranks < 1):
            raise UsageError(f"ranks must be an integer >= 1, got {self.ranks!r}", source="ranks")
        if self.ranks is not None and self.op in ROOTED and self.root >= self.ranks:
            raise UsageError(f"root must be in 0..{self.ranks - 1}, got {self.root}", source="root")
        self._check_overrides()

    def _check_overrides(self) -> None:
        if self.algorithm is not None:
            _known(self.algorithm, list(ALGORITHMS), "algorithm", "algorithm")
            known = algorithms_for(self.op)
            if self.algorithm not in known:
                raise UsageError(
                    f"algorithm {self.algorithm!r} does not implement {self.op}; "
                    f"known: {', '.join(known)}",
                    source="algorithm",
                )
        if self.protocol is not None:
            _known(self.protocol, PROTOCOL_NAMES, "protocol", "protocol")
        if self.channels is not None and (not _is_int(self.channels) or self.channels < 1):
            raise UsageError(f"channels must be >= 1, got {self.channels}", source="channels")
        if self.channels is not None:
            check_at_most(self.channels, MAX_CHANNELS, source="channels", name="MAX_CHANNELS")
        check_family(self.family)
        _known(self.selection, SELECTIONS, "selection", "selection")
        for name in ("ll128_c2c", "net_tuner"):
            if not isinstance(getattr(self, name), bool):
                raise UsageError(f"{name} must be a bool, got {getattr(self, name)!r}", source=name)
        if not isinstance(self.buffers, NcclBuffers):
            raise UsageError(
                f"buffers must be an NcclBuffers, got {self.buffers!r}", source="buffers"
            )
        self._check_narrowing()

    def _check_narrowing(self) -> None:
        for name, allowed, known in (
            ("algorithms", self.algorithms, list(ALGORITHMS)),
            ("protocols", self.protocols, list(PROTOCOL_NAMES)),
        ):
            if allowed is None:
                continue
            object.__setattr__(self, name, frozenset(allowed))
            for value in sorted(allowed):
                _known(value, known, name[:-1], name)
            if not allowed:
                raise UsageError(f"{name} must allow at least one", source=name)
        for name in ("min_channels", "max_channels"):
            value = getattr(self, name)
            if value is not None and (not _is_int(value) or value < 1):
                raise UsageError(f"{name} must be an integer >= 1, got {value!r}", source=name)
            if value is not None:
                check_at_most(value, MAX_CHANNELS, source=name, name="MAX_CHANNELS")
        lo, hi = self.min_channels, self.max_channels
        if lo is not None and hi is not None and lo > hi:
            raise UsageError(
                f"min_channels ({lo}) exceeds max_channels ({hi})", source="min_channels"
            )

    def clamp_counts(self, counts: Sequence[int]) -> tuple[int, ...]:
        """The channel counts to try, each clamped into ``min_channels..max_channels`` (as NCCL
        clamps its channel count), without repeats, in the given order (it breaks exact ties);
        ``counts`` itself when no bound is set.

        >>> BenchRequest(max_channels=6).clamp_counts((8, 1, 2, 4, 16))
        (6, 1, 2, 4)
        """
        if self.min_channels is None and self.max_channels is None:
            return tuple(counts)
        lo = self.min_channels or 1
        hi = self.max_channels or MAX_CHANNELS
        return tuple(dict.fromkeys(min(max(c, lo), hi) for c in counts))

    def narrow(self, cands: Sequence[Candidate]) -> list[Candidate]:
        """``cands`` less the algorithms and protocols not allowed; a UsageError naming
        ``algorithms`` or ``protocols`` when nothing is left."""
        out = list(cands)
        for name, allowed, attr in (
            ("algorithms", self.algorithms, "algorithm"),
            ("protocols", self.protocols, "protocol"),
        ):
            if allowed is None or not out:
                continue
            kept = [c for c in out if getattr(c, attr) in allowed]
            if not kept:
                offered = sorted({getattr(c, attr) for c in out})
                raise UsageError(
                    f"allows {', '.join(sorted(allowed))} but the tuner's candidates for "
                    f"{self.op} here are {', '.join(offered)}",
                    source=name,
                )
            out = kept
        return out

    @property
    def itemsize(self) -> int:
        """Bytes per element of :attr:`dtype`."""
        return itemsize(self.dtype)

    @property
    def spec_redop(self) -> str:
        """The reduction the collective's spec gets (``sum`` for those that do not reduce, and
        for ``avg``: a sum whose scale by 1/n is local and not timed)."""
        return self.nccl_redop if self.nccl_redop != "avg" else "sum"

    @property
    def nccl_redop(self) -> str:
        """The reduction as NCCL is asked for it (``avg`` kept: the enable rules and the runtime
        need it); ``sum`` for collectives that do not reduce."""
        return self.redop if self.op in REDUCING else "sum"

    @property
    def spec_root(self) -> int:
        """The root the collective's spec gets (0 for those without one)."""
        return self.root if self.op in ROOTED else 0

    @property
    def printed_redop(self) -> str:
        """nccl-tests' redop column: the reduction, or ``none``."""
        return self.redop if self.op in REDUCING else "none"

    @property
    def printed_root(self) -> int:
        """nccl-tests' root column: the root, or -1."""
        return self.root if self.op in ROOTED else -1

    def nranks_on(self, topology: Topology) -> int:
        """The world size on ``topology``, checking that :attr:`ranks` and :attr:`root` fit."""
        n_all = len(topology.accelerators)
        n = n_all if self.ranks is None else self.ranks
        if not 1 <= n <= n_all:
            raise UsageError(
                f"ranks must be in 1..{n_all} on {topology.name}, got {n}", source="ranks"
            )
        if self.op in ROOTED and not self.root < n:
            raise UsageError(f"root must be in 0..{n - 1}, got {self.root}", source="root")
        return n

    def printed(self, nranks: int) -> list[tuple[int, int, int]]:
        """Per size: (printed size in bytes, printed count, spec count) on ``nranks`` ranks
        (:func:`~scaleup.collectives.spec.nccl_size_and_count`)."""
        size = self.itemsize
        return [nccl_size_and_count(self.op, s, size, nranks) for s in self.sizes_bytes]


def _is_int(value: object) -> bool:
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)
