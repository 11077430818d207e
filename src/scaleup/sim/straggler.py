"""Straggler ranks and per-rank start skew: a slower accelerator, a late arrival.

:class:`Stragglers` says which ranks of a collective are slow (``factors``: rank -> F >= 1) and
which arrive late (``skew_s``: rank -> seconds >= 0). :meth:`CompiledSchedule.run
<scaleup.sim.simulate.CompiledSchedule.run>` applies it (docs/models.md, "Stragglers and start
skew"):

- **Slow rank** (factor F): everything the accelerator does runs F times slower. Its thread
  blocks (the per-(rank, channel) CTA caps), its HBM and its links in both directions (and its
  virtual host link) carry bytes at 1/F of their rate, and every op it takes part in (issues,
  reads from or writes to) pays F times its protocol step latency; wire and switch latencies are
  not clocked by the accelerator and stay. Why the links too: the CTA cap binds the issuing
  rank only, but an NCCL connection moves bytes as fast as its slower end's copy loop, so the
  receiving side of a slow rank must pace its incoming bytes as well.
- **Late rank** (skew d): no op the rank takes part in starts before ``start_s + d``; ranks that
  are on time run whatever does not need it, then wait.

A schedule with stragglers is no longer invariant under a rank shift, so such runs are always
exact (every flow simulated, never flow classes).

Examples
--------
>>> Stragglers(factors={1: 1.3}).describe()
'straggler rank 1 x1.3'
>>> Stragglers(factors={1: 1.0}, skew_s={0: 0.0}).is_identity
True
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

import numpy as np

from scaleup.errors import UsageError

if TYPE_CHECKING:
    from scaleup.collectives.op_table import OpTable
    from scaleup.sim.network import Network

__all__ = ["Stragglers"]


def _frozen(values: Mapping[int, float], flag: str, rule: str, ok: Any) -> Mapping[int, float]:
    out: dict[int, float] = {}
    for rank, value in values.items():
        if isinstance(rank, bool) or not isinstance(rank, int | np.integer) or rank < 0:
            raise UsageError(f"a rank must be an integer >= 0, got {rank!r}", source=flag)
        try:
            number = float(value)
        except (TypeError, ValueError):
            raise UsageError(f"{rule}, got {value!r} for rank {rank}", source=flag) from None
        if not ok(number):
            raise UsageError(f"{rule}, got {value!r} for rank {rank}", source=flag)
        out[int(rank)] = number
    return MappingProxyType(dict(sorted(out.items())))


@dataclass(frozen=True)
class Stragglers:
    """Slow ranks (``factors``: rank -> F >= 1) and late ranks (``skew_s``: rank -> s >= 0).

    Ranks are the collective's ranks (schedule ranks). F = 1 and a skew of 0 are no change."""

    factors: Mapping[int, float] = field(default_factory=dict)
    skew_s: Mapping[int, float] = field(default_factory=dict)

    def __post_init__(self) -> None:
        finite = np.isfinite
        factors = _frozen(self.factors, "--straggler", "a straggler factor must be a number >= 1",
                          lambda f: finite(f) and f >= 1.0)  # fmt: skip
        skew = _frozen(self.skew_s, "--skew-us", "a start skew must be a number >= 0",
                       lambda s: finite(s) and s >= 0.0)  # fmt: skip
        object.__setattr__(self, "factors", factors)
        object.__setattr__(self, "skew_s", skew)

    @property
    def is_identity(self) -> bool:
        """True when nothing is slower or late (every factor 1, every skew 0)."""
        return all(f == 1.0 for f in self.factors.values()) and not any(self.skew_s.values())

    @property
    def key(self) -> tuple[tuple[tuple[int, float], ...], tuple[tuple[int, float], ...]]:
        """A hashable value equal for equal stragglers (for caches)."""
        return tuple(self.factors.items()), tuple(self.skew_s.items())

    def check(self, nranks: int) -> None:
        """Raise :class:`~scaleup.errors.UsageError` if a rank is not in ``0..nranks-1``."""
        for flag, values in (("--straggler", self.factors), ("--skew-us", self.skew_s)):
            for rank in values:
                if rank >= nranks:
                    raise UsageError(
                        f"rank {rank} is out of range: the collective has ranks 0..{nranks - 1}",
                        source=flag,
                    )

    def describe(self) -> str:
        """One line for a report header, e.g. ``straggler rank 1 x1.3; skew rank 0 +5 us``."""
        parts = [f"straggler rank {r} x{f:g}" for r, f in self.factors.items() if f != 1.0]
        parts += [f"skew rank {r} +{s * 1e6:g} us" for r, s in self.skew_s.items() if s]
        return "; ".join(parts) if parts else "none"

    # ---- what a run needs ----------------------------------------------------------------
    def rank_factor(self, nranks: int) -> np.ndarray:
        """F per schedule rank (1 for the others)."""
        out = np.ones(nranks)
        for rank, f in self.factors.items():
            out[rank] = f
        return out

    def rank_skew_s(self, nranks: int) -> np.ndarray:
        """Skew per schedule rank, seconds (0 for the others)."""
        out = np.zeros(nranks)
        for rank, s in self.skew_s.items():
            out[rank] = s
        return out

    def capacity_factor(
        self, net: Network, rank_map: np.ndarray, cta_rank: np.ndarray, nranks: int
    ) -> np.ndarray:
        """Per constraint (the network's, then the thread blocks'), the F its capacity is divided
        by: the slow accelerators' channels in and out, virtual host links, HBM and CTAs."""
        acc_factor = np.ones(len(net.acc_devices))
        np.maximum.at(acc_factor, rank_map[:nranks], self.rank_factor(nranks))
        dev_factor = np.ones(net.n_devices)
        dev_factor[net.acc_devices] = acc_factor
        out = np.ones(net.n_constraints + len(cta_rank))
        out[: net.n_channels] = np.maximum(dev_factor[net.ch_src], dev_factor[net.ch_dst])
        if net.virtual_hosts:
            out[net.vup], out[net.vdown] = acc_factor, acc_factor
        out[net.hbm] = acc_factor
        out[net.n_constraints :] = acc_factor[cta_rank]
        return out

    def op_ranks_max(self, table: OpTable, per_rank: np.ndarray) -> np.ndarray:
        """Per op, the largest ``per_rank`` value over the ranks it takes part in: the issuing
        rank, every source and every destination."""
        out = per_rank[table.rank].astype(np.float64)
        for ptr, ranks in ((table.src_ptr, table.src_rank), (table.dst_ptr, table.dst_rank)):
            counts = np.diff(ptr)
            owner = np.repeat(np.arange(len(counts)), counts)
            np.maximum.at(out, owner, per_rank[ranks])
        return out
