"""Sizes, times and bandwidths at the edges: parsing ``64M`` and formatting for tables.

Inside scaleup every quantity is in base units with the unit in its name: seconds (``_s``), bytes
(``_bytes``), bytes per second (``_bytes_per_s``). Sizes on the command line follow nccl-tests:
``K``, ``M``, ``G``, ``T`` are powers of 1024. Bandwidths printed as GB/s use 1e9 bytes/s, per
direction, as nccl-tests prints them.
"""

from __future__ import annotations

import re
from fractions import Fraction

from scaleup.errors import LimitError, UsageError
from scaleup.limits import MAX_SIZE_BYTES, check_at_most

__all__ = [
    "GB",
    "GIB",
    "KIB",
    "MIB",
    "TIB",
    "bytes_per_s_to_gb_per_s",
    "format_bytes",
    "format_bytes_approx",
    "gb_per_s_to_bytes_per_s",
    "parse_size",
    "s_to_us",
]

KIB = 1024
MIB = 1024**2
GIB = 1024**3
TIB = 1024**4
GB = 1e9  #: one GB/s is 1e9 bytes per second, as nccl-tests prints bandwidth.

_SIZE_SUFFIX = {"": 1, "B": 1, "K": KIB, "M": MIB, "G": GIB, "T": TIB}
_SIZE_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([KMGT]?)(?:I?B)?\s*$", re.IGNORECASE)
#: Most digits a size may be written with: 1 PiB (:data:`~scaleup.limits.MAX_SIZE_BYTES`) has 16,
#: and Python refuses to parse integers of more than 4,300.
_MAX_SIZE_DIGITS = 40


def parse_size(text: str | int, *, source: str = "size") -> int:
    """Parse a size such as ``8``, ``64K``, ``1M``, ``8G`` (powers of 1024) into bytes.

    Sizes above :data:`~scaleup.limits.MAX_SIZE_BYTES` (1 PiB) raise
    :class:`~scaleup.errors.LimitError`.

    >>> parse_size("64M")
    67108864
    >>> parse_size(8)
    8
    """
    if isinstance(text, int):
        if text < 0:
            raise UsageError(f"size must be >= 0, got {text}", source=source)
        check_at_most(text, MAX_SIZE_BYTES, source=source, name="MAX_SIZE_BYTES")
        return text
    text = str(text)
    match = _SIZE_RE.match(text)
    if not match:
        shown = text if len(text) <= 40 else text[:40] + "..."
        raise UsageError(f"not a size: {shown!r} (use e.g. 8, 64K, 1M, 8G)", source=source)
    if len(match.group(1)) > _MAX_SIZE_DIGITS:
        raise LimitError(
            f"a size of {len(match.group(1))} digits is more than the limit of {MAX_SIZE_BYTES} "
            "(scaleup.limits.MAX_SIZE_BYTES)",
            source=source,
        )
    value = Fraction(match.group(1)) * _SIZE_SUFFIX[match.group(2).upper()]  # exact, no float
    if value.denominator != 1:
        raise UsageError(f"size {text!r} is not a whole number of bytes", source=source)
    check_at_most(int(value), MAX_SIZE_BYTES, source=source, name="MAX_SIZE_BYTES")
    return int(value)


def format_bytes(n_bytes: float) -> str:
    """Format a byte count with a power-of-1024 suffix, as nccl-tests' sizes read.

    >>> format_bytes(67108864)
    '64M'
    >>> format_bytes(1000)
    '1000B'
    """
    for suffix, scale in (("T", TIB), ("G", GIB), ("M", MIB), ("K", KIB)):
        if n_bytes >= scale and n_bytes % scale == 0:
            return f"{int(n_bytes // scale)}{suffix}"
    return f"{int(n_bytes)}B"


def format_bytes_approx(n_bytes: float) -> str:
    """A byte count to three figures in the largest power-of-1024 unit, for messages.

    >>> format_bytes_approx(4 * 10**12)
    '3.64 TiB'
    >>> format_bytes_approx(512)
    '512 B'
    """
    for suffix, scale in (("TiB", TIB), ("GiB", GIB), ("MiB", MIB), ("KiB", KIB)):
        if n_bytes >= scale:
            return f"{n_bytes / scale:.3g} {suffix}"
    return f"{int(n_bytes)} B"


def gb_per_s_to_bytes_per_s(gb_per_s: float) -> float:
    """GB/s (1e9 bytes/s) to bytes/s."""
    return gb_per_s * GB


def bytes_per_s_to_gb_per_s(bytes_per_s: float) -> float:
    """Bytes/s to GB/s (1e9 bytes/s)."""
    return bytes_per_s / GB


def s_to_us(time_s: float) -> float:
    """Seconds to microseconds."""
    return time_s * 1e6
