"""The scaleup command line: typer app; the only place that prints."""

from __future__ import annotations

from scaleup.cli.app import app, main

__all__ = ["app", "main"]
