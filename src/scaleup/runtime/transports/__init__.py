"""Transports: how bytes move between ranks (see :mod:`scaleup.runtime.transports.base`)."""

from __future__ import annotations

from scaleup.runtime.transports.base import BaseTransport

__all__ = ["BaseTransport"]
