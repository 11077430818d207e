"""Calibration profiles: fitted model parameters as a TOML file, read back and applied to a fabric.

A profile is what ``scaleup calibrate`` writes and ``scaleup bench --profile`` reads::

    [profile]
    topology = "dgx-h100"          # the fabric it was fitted on (a preset, Nx<preset> or file)
    link_efficiency = 0.8012       # payload fraction of the scale-up links (catalog: 0.824)
    net_latency_us = 0.0           # added to NCCL's network step latency
    launch_latency_us = 4.97       # added to the host launch of every collective (4 us)
    logs = ["run1.log", "run2.log"]

    [uncertainty]                  # one standard deviation, from the fit's Jacobian
    link_efficiency = 0.0021
    launch_latency_us = 0.31

    [fit]
    fitted = ["link_efficiency", "launch_latency_us"]
    points = 12
    rms_log_error_before = 0.153
    rms_log_error_after = 0.012
    evaluations = 9

``link_efficiency`` and ``nic_efficiency`` are absent when not fitted (the catalog's stay); the
latencies default to 0. The file is checked by a pydantic model (unknown keys, out-of-range values
are one line naming the key). :meth:`Profile.calibration` is the
:class:`~scaleup.topology.model_profile.Calibration` the simulator applies (see that module for
where each figure enters).

>>> p = Profile(topology="dgx-h100", link_efficiency=0.8, launch_latency_us=5.0)
>>> loads(dumps(p), "p.toml") == p
True
>>> p.calibration().describe()
'link efficiency 0.800, launch latency +5.00 us'
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from scaleup.errors import ProfileFileError
from scaleup.files import parse_toml, read_text, validate
from scaleup.topology.model import Topology
from scaleup.topology.model_profile import (
    EFFICIENCY_RANGE,
    LATENCY_RANGE_S,
    LAUNCH_RANGE_S,
    Calibration,
)

__all__ = ["PARAMETERS", "FitSummary", "Profile", "apply_profile", "dumps", "load_profile", "loads"]

#: The parameters a profile can hold, in fit order.
PARAMETERS = ("link_efficiency", "nic_efficiency", "net_latency_us", "launch_latency_us")
_EFF_LO, _EFF_HI = EFFICIENCY_RANGE
_LAT_LO, _LAT_HI = (v * 1e6 for v in LATENCY_RANGE_S)
_LAUNCH_LO, _LAUNCH_HI = (v * 1e6 for v in LAUNCH_RANGE_S)


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Uncertainty(_Strict):
    """One standard deviation of each fitted parameter (absent: not fitted)."""

    link_efficiency: float | None = Field(default=None, ge=0)
    nic_efficiency: float | None = Field(default=None, ge=0)
    net_latency_us: float | None = Field(default=None, ge=0)
    launch_latency_us: float | None = Field(default=None, ge=0)


class FitSummary(_Strict):
    """How the fit went: parameters fitted, points, RMS of log(model/measured) before and after."""

    fitted: tuple[str, ...] = ()
    points: int = Field(default=0, ge=0)
    rms_log_error_before: float | None = None
    rms_log_error_after: float | None = None
    evaluations: int = Field(default=0, ge=0)


class Profile(_Strict):
    """The fitted parameters of one fabric (see the module docstring)."""

    topology: str
    link_efficiency: float | None = Field(default=None, ge=_EFF_LO, le=_EFF_HI)
    nic_efficiency: float | None = Field(default=None, ge=_EFF_LO, le=_EFF_HI)
    net_latency_us: float = Field(default=0.0, ge=_LAT_LO, le=_LAT_HI)
    launch_latency_us: float = Field(default=0.0, ge=_LAUNCH_LO, le=_LAUNCH_HI)
    logs: tuple[str, ...] = ()
    uncertainty: Uncertainty = Uncertainty()
    fit: FitSummary = FitSummary()

    def calibration(self) -> Calibration:
        """The corrections the simulator applies (:mod:`scaleup.topology.model_profile`)."""
        return Calibration(
            link_efficiency=self.link_efficiency,
            nic_efficiency=self.nic_efficiency,
            net_latency_s=self.net_latency_us * 1e-6,
            launch_latency_s=self.launch_latency_us * 1e-6,
        )


def _toml_value(value: Any) -> str:
    if isinstance(value, str):
        return json.dumps(value)  # a JSON string is a TOML basic string
    if isinstance(value, (tuple, list)):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    return repr(float(value)) if isinstance(value, float) else str(value)


def _table(name: str, data: dict[str, Any]) -> list[str]:
    lines = [f"[{name}]"]
    lines += [f"{key} = {_toml_value(v)}" for key, v in data.items() if v is not None]
    return [*lines, ""]


def dumps(profile: Profile) -> str:
    """The profile as TOML text (``[profile]``, ``[uncertainty]``, ``[fit]``)."""
    data = profile.model_dump()
    head = {k: data[k] for k in ("topology", *PARAMETERS, "logs")}
    return "\n".join(
        _table("profile", head)
        + _table("uncertainty", data["uncertainty"])
        + _table("fit", data["fit"])
    )


def loads(text: str, source: str) -> Profile:
    """A profile from TOML text; :class:`~scaleup.errors.ProfileFileError` naming the key."""
    doc = parse_toml(text, ProfileFileError, source)
    if not isinstance(doc.get("profile"), dict):
        raise ProfileFileError("no [profile] table", source=source)
    unknown = sorted(set(doc) - {"profile", "uncertainty", "fit"})
    if unknown:
        raise ProfileFileError(f"unknown table {unknown[0]!r}", source=source, entry=unknown[0])
    flat = {**doc["profile"], "uncertainty": doc.get("uncertainty", {}), "fit": doc.get("fit", {})}
    return validate(Profile, flat, ProfileFileError, source)


def load_profile(path: str | Path) -> Profile:
    """The profile in the file ``path``."""
    return loads(read_text(path, ProfileFileError), str(path))


def apply_profile(topology: Topology, profile: Profile | None) -> Topology:
    """``topology`` with the profile's corrections (unchanged for None)."""
    return topology if profile is None else topology.with_calibration(profile.calibration())
