"""Loading schedules from JSON: the schema, validated with pydantic, errors naming the op.

Every number is bounded by :mod:`scaleup.limits` (ranks, element counts and offsets, op ids,
channel and step tags), so a short file cannot ask for more than the op table can hold or the
machine can replay.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from scaleup.collectives.algorithms._common import graph_channels
from scaleup.collectives.schedule import Buffer, Chunk, Op, OpKind, OpTable, Schedule
from scaleup.collectives.spec import CollectiveSpec
from scaleup.errors import InputError, ScaleupError, UsageError
from scaleup.limits import MAX_ELEMENTS, MAX_RANKS, MAX_SCHEDULE_OPS, MAX_TAG

__all__ = ["schedule_from_dict"]

_BUFFERS = {b.label: b for b in Buffer}
_KINDS = {k.label: k for k in OpKind}


_Rank = Annotated[int, Field(ge=0, lt=MAX_RANKS)]
_Elements = Annotated[int, Field(ge=0, le=MAX_ELEMENTS)]
_OpId = Annotated[int, Field(ge=0, lt=MAX_SCHEDULE_OPS)]
_Tag = Annotated[int, Field(ge=0, le=MAX_TAG)]
_Chunks = Annotated[
    list[tuple[_Rank, Literal["input", "output", "scratch"], _Elements]],
    Field(max_length=MAX_RANKS),
]


class _SpecModel(BaseModel):
    model_config = ConfigDict(extra="forbid")
    collective: str
    nranks: int = Field(ge=1, le=MAX_RANKS)
    count: _Elements
    root: int = 0
    redop: str = "sum"


class _OpModel(BaseModel):
    model_config = ConfigDict(extra="forbid")
    id: _OpId
    kind: Literal["copy", "reduce", "switch_reduce"]
    rank: _Rank
    count: _Elements
    srcs: _Chunks
    dsts: _Chunks
    deps: list[_OpId] = []
    channel: _Tag = 0
    step: _Tag = 0


class _ScheduleModel(BaseModel):
    model_config = ConfigDict(extra="forbid")
    format: Literal["scaleup.schedule/1"] = "scaleup.schedule/1"  # == SCHEDULE_FORMAT
    algorithm: str = "custom"
    params: dict[str, Any] = {}
    spec: _SpecModel
    scratch_count: _Elements = 0
    ops: list[_OpModel] = Field(max_length=MAX_SCHEDULE_OPS)


def _where(loc: tuple[Any, ...]) -> str:
    parts: list[str] = []
    for item in loc:
        if isinstance(item, int) and parts:
            parts[-1] += f"[{item}]"
        else:
            parts.append(str(item))
    return ".".join(parts)


#: CollectiveSpec's error sources -> the keys of the file's ``spec`` table.
_SPEC_KEYS = {
    "op": "collective", "ranks": "nranks", "count": "count", "root": "root", "redop": "redop",
}  # fmt: skip


def _spec(model: _SpecModel) -> CollectiveSpec:
    """The CollectiveSpec of the file; its errors name the ``spec`` key, not a flag."""
    try:
        return CollectiveSpec(**model.model_dump())
    except ScaleupError as error:
        key = _SPEC_KEYS.get(error.source or "")
        if key is not None:
            error.source, error.entry = None, f"spec.{key}"
        raise


def _check_sim_params(params: Mapping[str, Any]) -> None:
    """The parameters the simulator reads from a schedule's ``params`` table, checked as the
    builders check them: a file may carry any others (they describe how it was built), but
    these change its timing."""
    try:
        graph_channels(dict(params))
    except UsageError as error:
        raise InputError(error.message, entry="params.graph_channels") from None


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
        _check_sim_params(model.params)
        spec = _spec(model.spec)
        ops = []
        for position, raw in enumerate(model.ops):
            if raw.id != position:
                raise InputError(
                    f"op ids must be 0..n-1 in order, got id {raw.id}", entry=f"ops[{position}]"
                )
            srcs = tuple(Chunk(r, _BUFFERS[b], o, raw.count) for r, b, o in raw.srcs)
            dsts = tuple(Chunk(r, _BUFFERS[b], o, raw.count) for r, b, o in raw.dsts)
            ops.append(
                Op(
                    raw.id,
                    _KINDS[raw.kind],
                    raw.rank,
                    srcs,
                    dsts,
                    tuple(raw.deps),
                    raw.channel,
                    raw.step,
                )
            )
        return Schedule(
            spec, model.algorithm, OpTable.from_ops(ops), model.scratch_count, model.params
        )
    except ScaleupError as error:
        if error.source is None:
            error.source = source
            error.args = (error.one_line(),)
        raise
