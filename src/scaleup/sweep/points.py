"""What a sweep point is: a JSON-able dict, its canonical JSON and its id; the lead columns.

A *point* is a small dict (``{"kind": "bench", "topology": ..., ...}``): pure data, picklable,
evaluated anywhere. Its id is a hash of its canonical JSON, so a resumed sweep recognises the
points it already finished. Every result row starts with :data:`LEAD_COLUMNS`.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

__all__ = ["HIDDEN_POINT_KEYS", "LEAD_COLUMNS", "canonical", "point_id"]

#: Keys of a point that are not copied into result columns (bulky, or the id itself).
HIDDEN_POINT_KEYS = ("topology_text", "profile_text")
#: Columns every result row starts with, whatever its kind; no spec key may take these names.
LEAD_COLUMNS = ("point_id", "kind", "status", "error_type", "error", "elapsed_s")


def _json_default(value: Any) -> Any:
    if hasattr(value, "item"):
        return value.item()
    raise TypeError(f"point values must be JSON data, got {type(value).__name__}")


#: One encoder for every point (``json.dumps`` would build one per call: a third of the time of a
#: million-point spec); ``allow_nan=False`` refuses NaN and infinities at any depth.
_CANONICAL = json.JSONEncoder(
    sort_keys=True, separators=(",", ":"), default=_json_default, allow_nan=False
)


def canonical(point: dict[str, Any]) -> str:
    """The canonical JSON of a point (sorted keys, no spaces): what its id hashes.

    Raises
    ------
    ValueError
        A value is not finite.
    """
    try:
        return _CANONICAL.encode(point)
    except ValueError as error:
        if "Circular" in str(error):
            raise
        raise ValueError("point values must be finite") from None


def point_id(point: dict[str, Any]) -> str:
    """A stable 16-hex-digit id: the SHA-256 of the point's canonical JSON.

    >>> point_id({"kind": "bench", "bytes": 8}) == point_id({"bytes": 8, "kind": "bench"})
    True
    """
    return hashlib.sha256(canonical(point).encode()).hexdigest()[:16]
