"""scaleup: model, simulate and run memory-semantic scale-up fabrics and their collectives."""

from __future__ import annotations

__all__ = ["__version__"]

__version__ = "0.1.0"
