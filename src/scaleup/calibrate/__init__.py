"""Calibration: nccl-tests / rccl-tests logs in, a profile of fitted model parameters out.

:mod:`~scaleup.calibrate.logs` reads the logs, :mod:`~scaleup.calibrate.fit` fits a few
physical parameters (link and NIC efficiency, network and launch latency) by bounded least
squares, :mod:`~scaleup.calibrate.profile` writes and reads the profile TOML and applies it to a
fabric (``scaleup bench --profile``). docs/calibrate.md walks through an example.
"""

from __future__ import annotations

from scaleup.calibrate.fit import Fit, Point, PointError, fit_profile, points_of
from scaleup.calibrate.logs import LogRow, ParsedLog, Pin, parse_log, read_logs
from scaleup.calibrate.profile import (
    Profile,
    apply_profile,
    dumps,
    load_profile,
    loads,
)

__all__ = [
    "Fit",
    "LogRow",
    "ParsedLog",
    "Pin",
    "Point",
    "PointError",
    "Profile",
    "apply_profile",
    "dumps",
    "fit_profile",
    "load_profile",
    "loads",
    "parse_log",
    "points_of",
    "read_logs",
]
