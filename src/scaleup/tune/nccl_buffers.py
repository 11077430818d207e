"""NCCL's buffer and chunk sizes that its environment sets: the steps pipelines move.

NCCL reads four sizes from its environment that change how its kernels cut a message, not which
algorithm runs: ``NCCL_BUFFSIZE`` (the Simple protocol's buffer, ``NCCL_STEPS`` = 8 slots of it a
step; default 4 MiB, init.cc lines 699-713 at NCCL 2.28.7), ``NCCL_P2P_NET_CHUNKSIZE`` (a p2p
transfer's chunk across nodes, default 128 KiB, line 704; at most one Simple slot, line 721),
``NCCL_NVLS_CHUNKSIZE`` (an NVLS step's bytes per head, default 128 KiB; NCCL 2.30.7
src/transport/nvls.cc line 160) and ``NCCL_NVLSTREE_MAX_CHUNKSIZE`` (the cap on NVLS-Tree's
chunk; unset, 64 KiB from four nodes on, else the NVLS chunk, nvls.cc lines 223-229).

A network plugin may set them as well: aws-ofi-nccl does on AWS instances
(:mod:`scaleup.tune.ofi_env`), without overwriting a value the user set. :class:`NcclBuffers`
holds the values set (None: NCCL's own rule decides); :meth:`NcclBuffers.over` lays the user's
over the plugin's.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Final

from scaleup.errors import UsageError

__all__ = [
    "DEFAULT_BUFFSIZE_BYTES",
    "NCCL_BUFFER_VARS",
    "NCCL_STEPS",
    "NcclBuffers",
    "read_nccl_buffers",
]

#: ``NCCL_STEPS``: slots of a connection's buffer (src/include/device.h).
NCCL_STEPS: Final = 8
#: ``DEFAULT_BUFFSIZE`` (init.cc line 699): the Simple protocol's buffer, 4 MiB.
DEFAULT_BUFFSIZE_BYTES: Final = 1 << 22
#: Each variable and the :class:`NcclBuffers` field it sets.
NCCL_BUFFER_VARS: Final = {
    "NCCL_BUFFSIZE": "buffsize_bytes",
    "NCCL_P2P_NET_CHUNKSIZE": "p2p_net_chunk_bytes",
    "NCCL_NVLS_CHUNKSIZE": "nvls_chunk_bytes",
    "NCCL_NVLSTREE_MAX_CHUNKSIZE": "nvls_tree_max_chunk_bytes",
}
#: The range a value must lie in: a slot of at least 1 KiB, at most 1 GiB (NCCL reads the
#: values as ints and allocates the buffers at init; these bounds keep the simulated pipelines
#: meaningful).
_MIN_BYTES: Final = 1024
_MAX_BYTES: Final = 1 << 30


@dataclass(frozen=True)
class NcclBuffers:
    """The sizes NCCL's environment sets, in bytes; None where it leaves NCCL's own rule."""

    buffsize_bytes: int | None = None
    p2p_net_chunk_bytes: int | None = None
    nvls_chunk_bytes: int | None = None
    nvls_tree_max_chunk_bytes: int | None = None

    def over(self, base: NcclBuffers) -> NcclBuffers:
        """These values where set, ``base``'s elsewhere: a network plugin's variables do not
        overwrite the user's.

        >>> NcclBuffers(buffsize_bytes=1 << 21).over(NcclBuffers(1 << 23, 1 << 19))
        NcclBuffers(buffsize_bytes=2097152, p2p_net_chunk_bytes=524288, nvls_chunk_bytes=None, \
nvls_tree_max_chunk_bytes=None)
        """
        values = {}
        for f in fields(self):
            mine = getattr(self, f.name)
            values[f.name] = getattr(base, f.name) if mine is None else mine
        return NcclBuffers(**values)

    @property
    def simple_step_bytes(self) -> int:
        """One Simple slot: the buffer over ``NCCL_STEPS`` (512 KiB by default).

        >>> NcclBuffers().simple_step_bytes, NcclBuffers(buffsize_bytes=8 << 20).simple_step_bytes
        (524288, 1048576)
        """
        return (self.buffsize_bytes or DEFAULT_BUFFSIZE_BYTES) // NCCL_STEPS

    def applied(self) -> dict[str, str]:
        """The variables these values amount to, NCCL's names, for headers and explanations."""
        out = {}
        for var, name in NCCL_BUFFER_VARS.items():
            value = getattr(self, name)
            if value is not None:
                out[var] = str(value)
        return out


def _size(var: str, value: str) -> int:
    try:
        n = int(value.strip())
    except ValueError:
        n = 0
    if not _MIN_BYTES <= n <= _MAX_BYTES:
        raise UsageError(
            f"{value!r} must be a byte count, an integer in {_MIN_BYTES}..{_MAX_BYTES}",
            source=var,
        )
    if var == "NCCL_BUFFSIZE" and n % NCCL_STEPS:
        raise UsageError(
            f"{value!r} must be a multiple of {NCCL_STEPS} (NCCL_STEPS slots)", source=var
        )
    return n


def read_nccl_buffers(env: Mapping[str, str]) -> NcclBuffers:
    """The sizes ``env`` sets (see the module); a bad value raises a
    :class:`~scaleup.errors.UsageError` whose ``source`` is the variable's name.

    >>> read_nccl_buffers({"NCCL_BUFFSIZE": "8388608", "NCCL_ALGO": "ring"}).buffsize_bytes
    8388608
    >>> read_nccl_buffers({}) == NcclBuffers()
    True
    """
    values = {name: _size(var, env[var]) for var, name in NCCL_BUFFER_VARS.items() if var in env}
    return NcclBuffers(**values)
