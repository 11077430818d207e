"""Explicit limits on the sizes a user can ask for, checked before anything is allocated.

A 60-byte input must not take the machine: every size that reaches scaleup from a flag, a preset
parameter or a field of a topology, schedule or model file is checked against one of these
constants *before* scaleup allocates anything proportional to it, and refused with a one-line
:class:`~scaleup.errors.LimitError` naming the field (the CLI shows the flag). Sizes within the
fixed limits can still be more than this machine holds: :func:`check_memory` compares an
estimate of the bytes a job needs with what this process may still allocate.

Each constant says why its value; none is a property of real hardware, all are far above what
the presets and the catalog describe, so no real fabric or collective is refused.
"""

from __future__ import annotations

import math
import os
import resource
from pathlib import Path

from scaleup.errors import LimitError

__all__ = [
    "BYTES_PER_OP",
    "MAX_CHANNELS",
    "MAX_CHUNKS",
    "MAX_DEVICES",
    "MAX_ELEMENTS",
    "MAX_LINKS",
    "MAX_LINK_COUNT",
    "MAX_LINK_GB_PER_S",
    "MAX_MODEL_DIM",
    "MAX_NAME_CHARS",
    "MAX_PAIR_TABLE_RANKS",
    "MAX_RANKS",
    "MAX_SCHEDULE_OPS",
    "MAX_SIZE_BYTES",
    "MAX_SPEC_CHARS",
    "MAX_TAG",
    "available_memory_bytes",
    "check_at_most",
    "check_memory",
]

#: Largest message size in bytes (``-b``, ``-e``, ``--reserve``, any ``8G``-style size): 1 PiB.
#: Above the pooled HBM of any machine in the catalog (GB200 NVL72: 13.5 TB) by ~80x, and small
#: enough that byte counts times an 8-byte itemsize stay exact in float64 (below 2**53).
MAX_SIZE_BYTES = 2**50
#: Largest element count or offset (a collective's ``count``, a schedule chunk's offset, a
#: scratch buffer): one element per byte of :data:`MAX_SIZE_BYTES`.
MAX_ELEMENTS = MAX_SIZE_BYTES
#: Largest world size, and most accelerators in one topology: 16,384, the size of the largest
#: training clusters' scale-out domains, and what ``Nx`` presets reach on a three-tier fat tree
#: (``2048xdgx-h100``; three tiers of 64-port switches hold 65,536 NICs). A ring all_reduce over
#: this many ranks already has ~800M ops.
MAX_RANKS = 16_384
#: Most devices (accelerators, switches, hosts, NICs) in one topology: 4 per rank at
#: :data:`MAX_RANKS`; the largest preset fabrics have 2.6-2.8 per rank (``2048xdgx-h100``: 42,240;
#: ``227xgb200-nvl72:hosts=true``: 46,225). Building one costs ~1 kB.
MAX_DEVICES = 4 * MAX_RANKS
#: Most link entries in one topology: 24 per rank at :data:`MAX_RANKS` (was 262,144, which refused
#: NVL72 racks beyond 188 x 72 GPUs). The densest preset, ``gb200-nvl72`` (18 NVLink entries per
#: GPU, plus its NIC's two and the fat tree's), has 22.3 per GPU with ``hosts=true``:
#: ``227xgb200-nvl72:hosts=true`` (16,344 GPUs) has 363,672 and builds and validates in ~4 s at
#: ~270 MB peak RSS (~0.7 kB per link).
MAX_LINKS = 24 * MAX_RANKS
#: Most accelerators of a per-pair table (``topo show --pairs``): n(n-1)/2 rows, 523,776 at 1,024
#: accelerators (~100 MB of rows, tens of seconds to print); beyond, the summary samples pairs.
MAX_PAIR_TABLE_RANKS = 1024
#: Most parallel links in one link entry (``count``): 14x the most any catalog accelerator has
#: (18 NVLink ports) times a switch tray's 144 ports; keeps channel capacities finite and exact.
MAX_LINK_COUNT = 4096
#: Highest per-link bandwidth override in GB/s per direction: 1,000x the fastest catalog link
#: (NVLink-C2C, 450 GB/s); keeps bandwidths times counts times 1e9 far inside float64.
MAX_LINK_GB_PER_S = 1e6
#: Most channels of a schedule (``--channels``): NCCL caps channels at ``MAXCHANNELS`` (32 in
#: ``src/include/device.h`` for years, 64 in recent releases); 64 keeps every NCCL setting valid.
MAX_CHANNELS = 64
#: Deepest pipelining (``--chunks``): 64x the tuner's ``MAX_PIPELINE_CHUNKS`` (16); every chunk
#: multiplies the op count, so deeper pipelines are also caught by :data:`MAX_SCHEDULE_OPS`.
MAX_CHUNKS = 1024
#: Most ops of one schedule (estimated before it is built): 20x a 1024-rank ring all_reduce
#: (3.1M ops), more than a 1024-rank ring over 8 channels (25M ops) that the tuner builds for
#: ``bench --topology ualink-pod:n=1024``. Memory is checked as well: see :data:`BYTES_PER_OP`.
MAX_SCHEDULE_OPS = 64_000_000
#: Bytes one schedule op costs, for :func:`check_memory` before a schedule is built: measured
#: peak RSS was 240 B/op to build a 512-rank ring all_reduce (3.1M ops) and 300 B/op to build
#: and simulate it; building a 1024-rank tree peaked at 660 B/op, but its estimate is 1.3x its
#: op count. 512 B/op covers all of them.
BYTES_PER_OP = 512
#: Largest number in a model's shape (layers, hidden, heads, kv_heads, ffn, vocab, seq, experts,
#: top_k) or a batch (``--seq``, ``--mbs``, ``--gbs``): 2**24, 16.7M, over 60x the widest
#: published figures (vocab 256k, hidden 16,384) and above 10M-token contexts; every parameter,
#: FLOP and byte count computed from such numbers stays far inside float64.
MAX_MODEL_DIM = 2**24
#: Largest channel or step tag of a schedule op: the int32 columns of the op table.
MAX_TAG = 2**31 - 1
#: Longest name (preset, topology, device id, link technology, model): ``NAME_MAX`` of Linux
#: file names, so a name is never longer than a file could be called.
MAX_NAME_CHARS = 255
#: Longest topology argument (a preset with ``key=value`` parameters, or a file path):
#: ``PATH_MAX`` of Linux; also keeps every integer typed in it below Python's 4,300-digit limit.
MAX_SPEC_CHARS = 4096


def check_at_most(
    value: float,
    limit: float,
    *,
    source: str | None,
    name: str,
    what: str = "",
    entry: str | None = None,
) -> None:
    """Raise :class:`LimitError` naming ``source`` (and ``entry``) unless ``value <= limit``.

    ``name`` is the constant (``"MAX_CHANNELS"``) so the message says which limit it was;
    ``what`` the unit counted (``"links"``), when ``source`` alone does not say it.

    >>> check_at_most(8, MAX_CHANNELS, source="channels", name="MAX_CHANNELS")
    >>> check_at_most(10**6, 64, source="channels", name="MAX_CHANNELS")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    scaleup.errors.LimitError: channels: 1000000 is more than the limit of 64 (...MAX_CHANNELS)
    """
    if not value <= limit:
        raise LimitError(
            f"{_number(value)}{' ' + what if what else ''} is more than the limit of "
            f"{_number(limit)} (scaleup.limits.{name})",
            source=source,
            entry=entry,
        )


def _number(value: float) -> str:
    """A number as short text: floats as ``%g``, integers of more than 20 digits as ``~10^k``."""
    if isinstance(value, float):
        return f"{value:g}"
    digits = abs(int(value)).bit_length() * math.log10(2)
    return str(value) if digits < 20 else f"~10^{math.floor(digits)}"


def available_memory_bytes() -> int:
    """Bytes this process may still allocate: the least of the kernel's ``MemAvailable``, the
    cgroup (v2) limit left and the address-space rlimit left (the OOM killer acts on the first
    two, ``MemoryError`` comes from the third)."""
    candidates = []
    meminfo = _read("/proc/meminfo")
    for line in meminfo.splitlines():
        if line.startswith("MemAvailable:"):
            candidates.append(int(line.split()[1]) * 1024)
    cgroup_max = _read("/sys/fs/cgroup/memory.max")
    cgroup_now = _read("/sys/fs/cgroup/memory.current")
    if cgroup_max.strip().isdigit() and cgroup_now.strip().isdigit():
        candidates.append(int(cgroup_max) - int(cgroup_now))
    soft, _ = resource.getrlimit(resource.RLIMIT_AS)
    if soft != resource.RLIM_INFINITY:
        candidates.append(soft - _vm_size_bytes())
    if not candidates:  # not Linux: trust the physical memory figure
        candidates.append(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))
    return max(0, min(candidates))


def _vm_size_bytes() -> int:
    for line in _read("/proc/self/status").splitlines():
        if line.startswith("VmSize:"):
            return int(line.split()[1]) * 1024
    return 0


def _read(path: str) -> str:
    try:
        return Path(path).read_text(encoding="ascii")
    except (OSError, UnicodeDecodeError):
        return ""


def check_memory(estimate_bytes: float, *, what: str, source: str) -> None:
    """Raise :class:`LimitError` when ``estimate_bytes`` is more than this process may allocate.

    ``what`` names the job (``"verify buffers"``), ``source`` the field that sized it.
    """
    available = available_memory_bytes()
    if estimate_bytes > available:
        raise LimitError(
            f"{what} would need about {_gib(estimate_bytes)}, more than the "
            f"{_gib(available)} this machine has free",
            source=source,
        )


def _gib(n_bytes: float) -> str:
    if n_bytes >= 2**70:
        return f"~2^{int(math.log2(n_bytes))} bytes"
    return f"{n_bytes / 2**30:,.1f} GiB"
