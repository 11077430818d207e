"""The topology TOML file, as pydantic models (shape and types only; the rules that need the
catalog or the whole graph live in :mod:`scaleup.topology.model`).

File format (DESIGN.md), with the optional keys scaleup adds::

    name = "two-h100"
    description = "..."        # optional, free text
    peer_access = true         # optional (default true); false = no P2P load/store (--no-p2p)
    torus_dims = [4, 4]        # optional: the accelerators form this grid (dimension 0 fastest);
    torus_wrap = [true, true]  #   routed in dimension order (default: wraparound everywhere)

    [[devices]]
    id = "g0"
    type = "H100"              # a catalog accelerator, switch chip, "host" or a NIC
    node = 0                   # optional (default 0): server index in a multi-node topology

    [[links]]
    a = "g0"
    b = "g1"
    tech = "nvlink4"           # a catalog link technology
    count = 18                 # optional (default 1): parallel links, merged into one channel
    bandwidth_gb_per_s = 25.0  # optional: per-link, per-direction override of the catalog

    [[faults]]                 # optional: damage to the links above (scaleup.topology.faults)
    a = "g0"
    b = "g1"
    failed = true              # every link between a and b removed ...
    # degrade = 0.5            # ... or their bandwidth multiplied by 0 < degrade <= 1 (one of two)

Unknown keys are errors (``extra="forbid"``). Names and ids are at most
:data:`~scaleup.limits.MAX_NAME_CHARS` characters, and the lists at most
:data:`~scaleup.limits.MAX_DEVICES` devices and :data:`~scaleup.limits.MAX_LINKS` links, checked
before any device is built; the other limits are the model's.
"""

from __future__ import annotations

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StrictBool,
    StrictFloat,
    StrictInt,
    StrictStr,
    model_validator,
)

from scaleup.limits import MAX_DEVICES, MAX_LINKS, MAX_NAME_CHARS

__all__ = ["DeviceEntry", "FaultEntry", "LinkEntry", "TopologyFile"]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class DeviceEntry(_Strict):
    """One ``[[devices]]`` table."""

    id: StrictStr = Field(min_length=1, max_length=MAX_NAME_CHARS)
    type: StrictStr = Field(min_length=1, max_length=MAX_NAME_CHARS)
    node: StrictInt = Field(default=0, ge=0)


class LinkEntry(_Strict):
    """One ``[[links]]`` table."""

    a: StrictStr = Field(min_length=1, max_length=MAX_NAME_CHARS)
    b: StrictStr = Field(min_length=1, max_length=MAX_NAME_CHARS)
    tech: StrictStr = Field(min_length=1, max_length=MAX_NAME_CHARS)
    count: StrictInt = Field(default=1, gt=0)
    bandwidth_gb_per_s: StrictFloat | StrictInt | None = Field(
        default=None, gt=0, allow_inf_nan=False
    )


class FaultEntry(_Strict):
    """One ``[[faults]]`` table: the links between ``a`` and ``b`` failed or degraded."""

    a: StrictStr = Field(min_length=1, max_length=MAX_NAME_CHARS)
    b: StrictStr = Field(min_length=1, max_length=MAX_NAME_CHARS)
    failed: StrictBool = False
    degrade: StrictFloat | StrictInt | None = Field(default=None, gt=0, le=1, allow_inf_nan=False)

    @model_validator(mode="after")
    def _one_of(self) -> FaultEntry:
        if self.failed == (self.degrade is not None):
            raise ValueError("give one of failed = true and degrade = F (0 < F <= 1)")
        return self


class TopologyFile(_Strict):
    """The whole file."""

    name: StrictStr = Field(min_length=1, max_length=MAX_NAME_CHARS)
    description: StrictStr = ""
    peer_access: StrictBool = True
    torus_dims: list[StrictInt] | None = Field(default=None, min_length=1, max_length=16)
    torus_wrap: list[StrictBool] | None = Field(default=None, min_length=1, max_length=16)
    devices: list[DeviceEntry] = Field(min_length=1, max_length=MAX_DEVICES)
    links: list[LinkEntry] = Field(default_factory=list, max_length=MAX_LINKS)
    faults: list[FaultEntry] = Field(default_factory=list, max_length=MAX_LINKS)
