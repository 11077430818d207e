"""Fitting a profile: a few physical parameters of the model, least squares on log(time).

What is fitted (at most four parameters, each bounded to a plausible range,
:mod:`scaleup.topology.model_profile`): the scale-up ``link_efficiency`` and the
``launch_latency_us`` offset always; ``nic_efficiency`` and ``net_latency_us`` only when the ranks
span several nodes (on one node nothing in the logs depends on them, so they stay the catalog's).

How (cheap on purpose):

1. The measured rows are grouped into points: one per (collective, size, dtype), its time the
   median over placements and files (the simulator does not tell in-place from out-of-place).
2. Each point is pinned to an algorithm and protocol (and channel count when NCCL_DEBUG printed
   one): what NCCL_DEBUG said ran, else the tuner's choice under the catalog figures. The channel
   count is otherwise left to the tuner, because it moves with the fitted figures (a channel
   bound by its thread block at one link efficiency is bound by the link at another; pinning it
   let the fit drift where ``bench`` then disagreed). An evaluation simulates the pinned
   candidates at the logs' sizes only, one request per (collective, dtype, algorithm, protocol,
   channels), all in one :class:`~scaleup.tune.TuneSession`.
3. ``scipy.optimize.least_squares`` (trust-region reflective, bounds, finite differences with a
   relative step of 1e-3, ``max_nfev`` 30 by default) minimises the residuals
   ``log(model) - log(measured)``: relative errors, so an 8 B row weighs as much as an 8 GiB row.
4. One standard deviation per parameter from the Jacobian at the solution:
   ``sqrt(diag(pinv(J^T J)) * sum(r^2) / (m - p))`` (none when there are no spare points).

The errors before and after are then taken as ``scaleup bench`` would print them: the tuner
choosing freely (pins from NCCL_DEBUG kept), without and with the profile.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from scaleup.calibrate.logs import ParsedLog, Pin
from scaleup.calibrate.profile import FitSummary, Profile, Uncertainty
from scaleup.collectives.spec import itemsize, nccl_size_and_count
from scaleup.errors import UsageError
from scaleup.sim.paths import link_class, link_efficiency
from scaleup.topology.model import Topology
from scaleup.topology.model_profile import (
    EFFICIENCY_RANGE,
    LATENCY_RANGE_S,
    LAUNCH_RANGE_S,
    Calibration,
)
from scaleup.tune import BenchRequest, TunedChoice, TuneSession

__all__ = ["Fit", "Point", "PointError", "fit_profile", "points_of"]

#: Default most evaluations of the residuals (each simulates every point once).
MAX_EVALUATIONS = 30


@dataclass(frozen=True)
class Point:
    """One measured time the fit explains: the median of its rows over placements and logs."""

    collective: str
    size_bytes: int
    dtype: str
    time_us: float
    samples: int
    pin: Pin | None = None


@dataclass(frozen=True)
class PointError:
    """A point's measured time and the model's before and after the fit (``held_out``: not fitted
    on, a check of the profile on sizes it has not seen)."""

    point: Point
    before_us: float
    after_us: float
    held_out: bool

    @property
    def error_before(self) -> float:
        """(model - measured) / measured with the catalog's figures."""
        return self.before_us / self.point.time_us - 1.0

    @property
    def error_after(self) -> float:
        """(model - measured) / measured with the profile."""
        return self.after_us / self.point.time_us - 1.0

    def to_dict(self) -> dict[str, object]:
        """A JSON-ready row."""
        p = self.point
        return {
            "collective": p.collective, "size_bytes": p.size_bytes, "dtype": p.dtype,
            "measured_us": p.time_us, "samples": p.samples, "before_us": self.before_us,
            "after_us": self.after_us, "error_before": self.error_before,
            "error_after": self.error_after, "held_out": self.held_out,
            "pinned": None if p.pin is None else f"{p.pin.algorithm}/{p.pin.protocol}",
        }  # fmt: skip


@dataclass(frozen=True)
class Fit:
    """A fitted profile and the per-point errors before and after it."""

    profile: Profile
    errors: tuple[PointError, ...]
    ranks: int


def points_of(logs: Sequence[ParsedLog]) -> list[Point]:
    """The measured rows of ``logs`` grouped into points (see the module docstring), by size."""
    groups: dict[tuple[str, int, str], list[float]] = {}
    pins: dict[tuple[str, int, str], Pin] = {}
    for log in logs:
        for row in log.rows:
            key = (row.collective, row.size_bytes, row.dtype)
            groups.setdefault(key, []).append(row.time_us)
            if row.pin is not None:
                pins[key] = row.pin
    return [
        Point(op, size, dtype, statistics.median(times), len(times), pins.get((op, size, dtype)))
        for (op, size, dtype), times in sorted(groups.items(), key=lambda kv: (kv[0][0], kv[0][1]))
    ]


def _choices(
    topology: Topology, points: Sequence[Point], pins: Sequence[Pin | None], ranks: int,
    session: TuneSession,
) -> list[TunedChoice]:  # fmt: skip
    """The model's choice at every point, one request per (op, dtype, pinned algo and proto)."""
    groups: dict[tuple[str, str, str | None, str | None, int | None], list[int]] = {}
    for i, (p, pin) in enumerate(zip(points, pins, strict=True)):
        key = (p.collective, p.dtype, *((pin.algorithm, pin.protocol, pin.channels) if pin else
                                        (None, None, None)))  # fmt: skip
        groups.setdefault(key, []).append(i)
    out: list[TunedChoice | None] = [None] * len(points)
    for (op, dtype, algo, proto, channels), members in groups.items():
        sizes = tuple(
            nccl_size_and_count(op, points[i].size_bytes, itemsize(dtype), ranks)[0]
            for i in members
        )
        request = BenchRequest(op=op, sizes_bytes=sizes, dtype=dtype, ranks=ranks,
                               algorithm=algo, protocol=proto, channels=channels)  # fmt: skip
        for i, choice in zip(members, session.sweep(topology, request), strict=True):
            out[i] = choice
    return [c for c in out if c is not None]


def _times_us(choices: Sequence[TunedChoice]) -> np.ndarray:
    return np.array([c.time_s * 1e6 for c in choices])


def _catalog_efficiency(topology: Topology, cls: int) -> float | None:
    """The catalog's payload fraction of the fabric's links of link class ``cls`` (the widest
    technology's, if several), or None when it has none."""
    techs = {
        c.tech: c.bandwidth_bytes_per_s for c in topology.channels if link_class(c.tech) == cls
    }
    if not techs:
        return None
    return link_efficiency(max(techs, key=lambda t: techs[t]))


def _parameters(topology: Topology, ranks: int) -> list[tuple[str, float, float, float]]:
    """(name, start, low, high) of every parameter the points can determine."""
    lo_e, hi_e = EFFICIENCY_RANGE
    lo_l, hi_l = (v * 1e6 for v in LATENCY_RANGE_S)
    out = []
    link = _catalog_efficiency(topology, 1)
    if link is not None:
        out.append(("link_efficiency", min(max(link, lo_e), hi_e), lo_e, hi_e))
    nodes = {a.node for a in topology.accelerators[:ranks]}
    nic = _catalog_efficiency(topology, 3)
    if len(nodes) > 1 and nic is not None:
        out.append(("nic_efficiency", min(max(nic, lo_e), hi_e), lo_e, hi_e))
        out.append(("net_latency_us", 0.0, lo_l, hi_l))
    out.append(("launch_latency_us", 0.0, LAUNCH_RANGE_S[0] * 1e6, LAUNCH_RANGE_S[1] * 1e6))
    return out


def _calibration(names: Sequence[str], x: Sequence[float]) -> Calibration:
    values = dict(zip(names, (float(v) for v in x), strict=True))
    return Calibration(
        link_efficiency=values.get("link_efficiency"),
        nic_efficiency=values.get("nic_efficiency"),
        net_latency_s=values.get("net_latency_us", 0.0) * 1e-6,
        launch_latency_s=values.get("launch_latency_us", 0.0) * 1e-6,
    )


def _sigmas(jac: np.ndarray, residuals: np.ndarray) -> list[float | None]:
    m, p = jac.shape
    if m <= p:
        return [None] * p
    cov = np.linalg.pinv(jac.T @ jac) * float(residuals @ residuals) / (m - p)
    return [float(math.sqrt(v)) if math.isfinite(v) and v >= 0 else None for v in np.diag(cov)]


def _rms(values: np.ndarray) -> float:
    return float(np.sqrt(np.mean(values**2))) if len(values) else math.nan


def fit_profile(
    topology: Topology,
    logs: Sequence[ParsedLog],
    *,
    topology_name: str,
    ranks: int | None = None,
    hold_out_every: int = 0,
    max_evaluations: int = MAX_EVALUATIONS,
) -> Fit:
    """Fit a :class:`Profile` of ``topology`` to the rows of ``logs`` (see the module docstring).

    ``ranks``: the communicator size (default: the logs' ``# Rank`` lines, else every
    accelerator). ``hold_out_every`` k > 1 keeps every k-th size (from the second) out of the fit
    and reports its error as a check of the profile on unseen sizes.
    """
    n = ranks or next((log.ranks for log in logs if log.ranks), None) or len(topology.accelerators)
    if not 2 <= n <= len(topology.accelerators):
        raise UsageError(f"{n} ranks on a fabric of {len(topology.accelerators)} accelerators",
                         source="--ranks")  # fmt: skip
    points = points_of(logs)
    held = [hold_out_every > 1 and i % hold_out_every == 1 for i in range(len(points))]
    train = [p for p, h in zip(points, held, strict=True) if not h]
    session = TuneSession()
    free = [p.pin for p in points]
    first = _choices(topology, points, free, n, session)
    before = _times_us(first)
    train_pins = [
        p.pin or Pin(c.algorithm, c.protocol)
        for p, c, h in zip(points, first, held, strict=True)
        if not h
    ]
    params = _parameters(topology, n)
    names = [name for name, *_ in params]
    measured = np.log([p.time_us for p in train])
    evaluations = 0

    def residuals(x: np.ndarray) -> np.ndarray:
        nonlocal evaluations
        evaluations += 1
        topo = topology.with_calibration(_calibration(names, [float(v) for v in x]))
        return np.log(_times_us(_choices(topo, train, train_pins, n, session))) - measured

    from scipy.optimize import least_squares  # here: scipy.optimize costs ~0.3 s to import

    result = least_squares(
        residuals, [s for _, s, _, _ in params], bounds=([lo for *_, lo, _ in params],
        [hi for *_, hi in params]), diff_step=1e-3, max_nfev=max_evaluations, method="trf",
    )  # fmt: skip
    best = _calibration(names, [float(v) for v in result.x])
    after = _times_us(_choices(topology.with_calibration(best), points, free, n, session))
    train_mask = ~np.array(held)
    rel = np.log([p.time_us for p in points])
    sigma = dict(zip(names, _sigmas(result.jac, result.fun), strict=True))
    values = dict(zip(names, (float(v) for v in result.x), strict=True))
    profile = Profile(
        topology=topology_name,
        logs=tuple(log.source for log in logs),
        uncertainty=Uncertainty(**sigma),
        fit=FitSummary(
            fitted=tuple(names), points=len(train), evaluations=evaluations,
            rms_log_error_before=_rms((np.log(before) - rel)[train_mask]),
            rms_log_error_after=_rms((np.log(after) - rel)[train_mask]),
        ),
        **values,
    )  # fmt: skip
    errors = tuple(
        PointError(p, float(b), float(a), h)
        for p, b, a, h in zip(points, before, after, held, strict=True)
    )
    return Fit(profile, errors, n)
