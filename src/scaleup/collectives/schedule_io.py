"""Loading schedules from JSON: the schema, validated with pydantic, errors naming the op."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from scaleup.collectives.schedule import Buffer, Chunk, Op, OpKind, OpTable, Schedule
from scaleup.collectives.spec import CollectiveSpec
from scaleup.errors import InputError, ScaleupError

__all__ = ["schedule_from_dict"]

_BUFFERS = {b.label: b for b in Buffer}
_KINDS = {k.label: k for k in OpKind}


class _SpecModel(BaseModel):
    model_config = ConfigDict(extra="forbid")
    collective: str
    nranks: int = Field(ge=1)
    count: int = Field(ge=0)
    root: int = 0
    redop: str = "sum"


class _OpModel(BaseModel):
    model_config = ConfigDict(extra="forbid")
    id: int = Field(ge=0)
    kind: Literal["copy", "reduce", "switch_reduce"]
    rank: int = Field(ge=0)
    count: int = Field(ge=0)
    srcs: list[tuple[int, Literal["input", "output", "scratch"], int]]
    dsts: list[tuple[int, Literal["input", "output", "scratch"], int]]
    deps: list[int] = []
    channel: int = 0
    step: int = 0


class _ScheduleModel(BaseModel):
    model_config = ConfigDict(extra="forbid")
    format: Literal["scaleup.schedule/1"] = "scaleup.schedule/1"  # == SCHEDULE_FORMAT
    algorithm: str = "custom"
    params: dict[str, Any] = {}
    spec: _SpecModel
    scratch_count: int = Field(default=0, ge=0)
    ops: list[_OpModel]


def _where(loc: tuple[Any, ...]) -> str:
    parts: list[str] = []
    for item in loc:
        if isinstance(item, int) and parts:
            parts[-1] += f"[{item}]"
        else:
            parts.append(str(item))
    return ".".join(parts)


def schedule_from_dict(data: Mapping[str, Any], *, source: str = "schedule") -> Schedule:
    """Validate ``data`` (the form :meth:`Schedule.to_dict` writes) and build the Schedule."""
    if not isinstance(data, Mapping):
        raise InputError("a schedule must be a JSON object with an 'ops' list", source=source)
    try:
        model = _ScheduleModel.model_validate(dict(data))
    except ValidationError as error:
        first = error.errors()[0]
        raise InputError(first["msg"], source=source, entry=_where(tuple(first["loc"]))) from error
    try:
        spec = CollectiveSpec(**model.spec.model_dump())
        ops = []
        for position, raw in enumerate(model.ops):
            if raw.id != position:
                raise InputError(f"op ids must be 0..n-1 in order, got id {raw.id}", entry=f"ops[{position}]")
            srcs = tuple(Chunk(r, _BUFFERS[b], o, raw.count) for r, b, o in raw.srcs)
            dsts = tuple(Chunk(r, _BUFFERS[b], o, raw.count) for r, b, o in raw.dsts)
            ops.append(Op(raw.id, _KINDS[raw.kind], raw.rank, srcs, dsts, tuple(raw.deps), raw.channel, raw.step))
        return Schedule(spec, model.algorithm, OpTable.from_ops(ops), model.scratch_count, model.params)
    except ScaleupError as error:
        if error.source is None:
            error.source = source
            error.args = (error.one_line(),)
        raise
