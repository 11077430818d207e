"""Where one collective's input, output and scratch are bound: in place or staged.

Symmetric arrays are bound where they are (zero copy); anything else goes through the group's
symmetric workspace, laid out as input, output, scratch (each 64-byte aligned). In place (input is
output) aliases the two only when the schedule is safe that way. An output that overlaps the input
otherwise has offsets that differ by rank, which symmetric addressing cannot bind: both are staged.
"""

from __future__ import annotations

from dataclasses import dataclass

from scaleup.collectives.schedule import Buffer
from scaleup.runtime.transports.base import Binding

__all__ = ["ALIGN", "Layout", "Staging", "overlap", "round_up", "stage"]

#: Alignment of the buffers in the workspace (bytes).
ALIGN = 64


def round_up(n: int) -> int:
    """``n`` rounded up to a multiple of :data:`ALIGN`."""
    return (n + ALIGN - 1) // ALIGN * ALIGN


def overlap(a: Binding | None, a_bytes: int, b: Binding | None, b_bytes: int) -> bool:
    """Whether two bound byte ranges share memory (same allocation, intersecting offsets)."""
    if a is None or b is None or a[0] != b[0]:
        return False
    return a[1] < b[1] + b_bytes and b[1] < a[1] + a_bytes


@dataclass(frozen=True)
class Layout:
    """Byte sizes of one collective's buffers and their offsets in the workspace."""

    in_bytes: int
    out_bytes: int
    scratch_bytes: int

    @property
    def ws_in(self) -> int:
        return 0

    @property
    def ws_out(self) -> int:
        return round_up(self.in_bytes)

    @property
    def ws_scratch(self) -> int:
        return self.ws_out + round_up(self.out_bytes)

    @property
    def total(self) -> int:
        """Workspace bytes the collective needs (sized from the spec alone: equal on all ranks)."""
        return self.ws_scratch + round_up(self.scratch_bytes)


@dataclass(frozen=True)
class Staging:
    """The bindings of one collective, and whether its input is copied in and output out."""

    bindings: dict[Buffer, Binding]
    copy_in: bool
    staged_out: bool


def stage(
    layout: Layout,
    ws: int,
    inp_loc: Binding | None,
    out_loc: Binding | None,
    in_place: bool,
    safe: bool,
) -> Staging:
    """Bind input, output and scratch: symmetric locations where possible, else workspace ``ws``.

    ``inp_loc``/``out_loc`` are the arrays' symmetric locations (None: not symmetric); ``safe``
    says whether the schedule may run with input and output aliased.
    """
    in_bytes, out_bytes = layout.in_bytes, layout.out_bytes
    if not in_place and overlap(inp_loc, in_bytes, out_loc, out_bytes):
        inp_loc = out_loc = None  # one is a block of the other: rank-dependent offsets
    copy_in = inp_loc is None
    bindings: dict[Buffer, Binding] = {Buffer.INPUT: inp_loc or (ws, layout.ws_in)}
    if in_place and safe:
        bindings[Buffer.OUTPUT] = bindings[Buffer.INPUT]
    elif (
        out_loc is not None and not in_place and not overlap(inp_loc, in_bytes, out_loc, out_bytes)
    ):
        bindings[Buffer.OUTPUT] = out_loc
    else:
        bindings[Buffer.OUTPUT] = (ws, layout.ws_out)
    if layout.scratch_bytes:
        bindings[Buffer.SCRATCH] = (ws, layout.ws_scratch)
    return Staging(bindings, copy_in, bindings[Buffer.OUTPUT] != out_loc)
