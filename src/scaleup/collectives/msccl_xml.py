"""Reading MSCCL XML: the ``<algo>`` files msccl-tools (MSCCLang), TACCL and RCCL ship, as data.

The format (msccl-tools ``msccl/language/ir.py``, read by the MSCCL/RCCL runtime)::

    <algo name proto="Simple|LL|LL128" nchannels nchunksperloop ngpus coll inplace [outofplace]>
      <gpu id i_chunks o_chunks s_chunks>
        <tb id send recv chan>          one threadblock: at most one send peer, one recv peer
          <step s type srcbuf srcoff dstbuf dstoff cnt depid deps hasdep/>
        </tb>
      </gpu>
    </algo>

Offsets and counts are in *chunks*; buffers are ``i`` (input), ``o`` (output), ``s`` (scratch).
A tb runs its steps in order; ``depid``/``deps`` name one step of another tb on the same gpu
(``-1``: none) that this step waits for; ``hasdep`` (some step waits for this one) is a hint
for the runtime and is ignored here. This module only parses and checks the structure (every
id, peer, buffer and bound), naming the element at fault in one line; what the steps *mean*
is :mod:`scaleup.collectives.msccl_import`'s job.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from dataclasses import dataclass

from scaleup.collectives.spec import COLLECTIVES, PROTOCOL_NAMES
from scaleup.errors import MscclFileError
from scaleup.limits import (
    MAX_CHANNELS,
    MAX_ELEMENTS,
    MAX_RANKS,
    MAX_SCHEDULE_OPS,
    check_at_most,
)

__all__ = [
    "RECEIVES",
    "SENDS",
    "STEP_TYPES",
    "MscclAlgo",
    "MscclGpu",
    "MscclStep",
    "MscclTb",
    "collective_name",
    "parse_msccl_xml",
]

#: Step types scaleup imports: send, receive, receive-copy-send, receive-reduce-copy,
#: receive-reduce-send, receive-reduce-copy-send, local copy, local reduce, no-op (a wait).
STEP_TYPES = ("s", "r", "rcs", "rrc", "rrs", "rrcs", "cpy", "re", "nop")
#: Step types that send to the tb's ``send`` peer / receive from its ``recv`` peer.
SENDS = frozenset({"s", "rcs", "rrs", "rrcs"})
RECEIVES = frozenset({"r", "rcs", "rrc", "rrs", "rrcs"})
BUFFERS = ("i", "o", "s")


@dataclass(frozen=True, slots=True)
class MscclStep:
    """One ``<step>``: offsets and ``cnt`` in chunks; ``depid``/``deps`` -1 when none."""

    s: int
    type: str
    srcbuf: str
    srcoff: int
    dstbuf: str
    dstoff: int
    cnt: int
    depid: int
    deps: int


@dataclass(frozen=True, slots=True)
class MscclTb:
    """One ``<tb>`` (threadblock): its peers (-1: none), channel and steps in order."""

    id: int
    send: int
    recv: int
    chan: int
    steps: tuple[MscclStep, ...]


@dataclass(frozen=True, slots=True)
class MscclGpu:
    """One ``<gpu>``: buffer sizes in chunks and its threadblocks."""

    id: int
    i_chunks: int
    o_chunks: int
    s_chunks: int
    tbs: tuple[MscclTb, ...]


@dataclass(frozen=True, slots=True)
class MscclAlgo:
    """The ``<algo>``: ``coll`` and ``proto`` already in scaleup's spelling."""

    name: str
    coll: str
    proto: str
    nchannels: int
    nchunksperloop: int
    ngpus: int
    inplace: bool
    gpus: tuple[MscclGpu, ...]


def collective_name(coll: str) -> str | None:
    """MSCCL's ``allreduce`` (or ``all_reduce``) -> scaleup's ``all_reduce``; None if unknown."""
    key = coll.lower().replace("_", "").replace("-", "")
    return next((c for c in COLLECTIVES if c.replace("_", "") == key), None)


class _Element:
    """Reads integer and text attributes of one element, errors naming it."""

    def __init__(self, element: ET.Element, source: str, where: str) -> None:
        self.element, self.source, self.where = element, source, where

    def fail(self, message: str) -> MscclFileError:
        return MscclFileError(message, source=self.source, entry=self.where)

    def text(self, name: str, default: str | None = None) -> str:
        value = self.element.get(name, default)
        if value is None:
            raise self.fail(f"missing attribute {name!r}")
        return value

    def integer(self, name: str, low: int, high: int, default: int | None = None) -> int:
        raw = self.element.get(name)
        if raw is None and default is not None:
            return default
        try:
            value = int(self.text(name).strip())
        except ValueError:
            raise self.fail(f"attribute {name}={raw!r} is not an integer") from None
        if not low <= value <= high:
            raise self.fail(f"attribute {name}={value} outside {low}..{high}")
        return value


def parse_msccl_xml(text: str, *, source: str = "schedule.xml") -> MscclAlgo:
    """Parse and structurally check an MSCCL XML document; errors name ``source`` and the element.

    >>> algo = parse_msccl_xml('<algo name="x" proto="LL" nchannels="1" nchunksperloop="2" '
    ...     'ngpus="1" coll="allreduce" inplace="0"><gpu id="0" i_chunks="2" o_chunks="2" '
    ...     's_chunks="0"><tb id="0" send="-1" recv="-1" chan="0"><step s="0" type="cpy" '
    ...     'srcbuf="i" srcoff="0" dstbuf="o" dstoff="0" cnt="2" depid="-1" deps="-1" '
    ...     'hasdep="0"/></tb></gpu></algo>')
    >>> algo.coll, algo.proto, algo.gpus[0].tbs[0].steps[0].type
    ('all_reduce', 'll', 'cpy')
    """
    if "<!DOCTYPE" in text or "<!ENTITY" in text:
        raise MscclFileError("DTDs and entities are not allowed in MSCCL XML", source=source)
    check_at_most(
        text.count("<step"), MAX_SCHEDULE_OPS, source=source, name="MAX_SCHEDULE_OPS",
        what="steps",
    )  # fmt: skip
    try:
        root = ET.fromstring(text)
    except ET.ParseError as error:
        raise MscclFileError(f"not well-formed XML: {error}", source=source) from None
    if root.tag != "algo":
        raise MscclFileError(f"the root element is <{root.tag}>, not <algo>", source=source)
    top = _Element(root, source, "algo")
    coll = collective_name(top.text("coll"))
    if coll is None:
        raise top.fail(f"unknown collective coll={top.text('coll')!r}")
    proto = top.text("proto", "Simple").lower()
    if proto not in PROTOCOL_NAMES:
        raise top.fail(f"unknown protocol proto={top.text('proto')!r} (Simple, LL or LL128)")
    ngpus = top.integer("ngpus", 1, MAX_RANKS)
    inplace = top.integer("inplace", 0, 1, default=0) == 1
    outofplace = top.integer("outofplace", 0, 1, default=0) == 1
    gpus = tuple(_gpu(e, ngpus, source) for e in root)
    ids = [g.id for g in gpus]
    if sorted(ids) != list(range(ngpus)):
        missing = sorted(set(range(ngpus)) - set(ids))
        detail = f"gpu {missing[0]} is missing" if missing else "a gpu id appears twice"
        raise top.fail(f"ngpus={ngpus} but {detail}")
    return MscclAlgo(
        name=top.text("name", "msccl"),
        coll=coll,
        proto=proto,
        nchannels=top.integer("nchannels", 1, MAX_CHANNELS, default=1),
        nchunksperloop=top.integer("nchunksperloop", 1, MAX_ELEMENTS),
        ngpus=ngpus,
        inplace=inplace and not outofplace,
        gpus=tuple(sorted(gpus, key=lambda g: g.id)),
    )


def _gpu(element: ET.Element, ngpus: int, source: str) -> MscclGpu:
    where = f"gpu {element.get('id', '?')}"
    e = _Element(element, source, where)
    if element.tag != "gpu":
        raise e.fail(f"unexpected element <{element.tag}> inside <algo>")
    gpu_id = e.integer("id", 0, ngpus - 1)
    tbs = tuple(_tb(t, gpu_id, ngpus, source) for t in element)
    by_id = {tb.id: tb for tb in tbs}
    if len(by_id) != len(tbs):
        raise e.fail("a tb id appears twice")
    for tb in tbs:
        for step in tb.steps:
            if step.depid < 0:
                continue
            at = f"{where} tb {tb.id} step {step.s}"
            target = by_id.get(step.depid)
            if target is None or target is tb:
                raise MscclFileError(
                    f"depid={step.depid} is not another tb of this gpu", source=source, entry=at
                )
            if not 0 <= step.deps < len(target.steps):
                raise MscclFileError(
                    f"deps={step.deps} is not a step of tb {step.depid}", source=source, entry=at
                )
    return MscclGpu(
        gpu_id,
        e.integer("i_chunks", 0, MAX_ELEMENTS),
        e.integer("o_chunks", 0, MAX_ELEMENTS),
        e.integer("s_chunks", 0, MAX_ELEMENTS),
        tbs,
    )


def _tb(element: ET.Element, gpu: int, ngpus: int, source: str) -> MscclTb:
    where = f"gpu {gpu} tb {element.get('id', '?')}"
    e = _Element(element, source, where)
    if element.tag != "tb":
        raise e.fail(f"unexpected element <{element.tag}> inside <gpu>")
    tb_id = e.integer("id", 0, MAX_SCHEDULE_OPS)
    peers = {}
    for name in ("send", "recv"):
        peer = e.integer(name, -1, MAX_RANKS)
        if peer >= ngpus or peer == gpu:
            raise e.fail(f"{name}={peer} is not another gpu (0..{ngpus - 1})")
        peers[name] = peer
    chan = e.integer("chan", 0, MAX_CHANNELS - 1, default=0)
    steps = tuple(_step(s, f"{where} step {i}", source) for i, s in enumerate(element))
    for step in steps:
        for needs, kinds in (("send", SENDS), ("recv", RECEIVES)):
            if step.type in kinds and peers[needs] < 0:
                raise MscclFileError(
                    f"step type {step.type!r} needs a {needs} peer but the tb has {needs}=-1",
                    source=source,
                    entry=f"{where} step {step.s}",
                )
    return MscclTb(tb_id, peers["send"], peers["recv"], chan, steps)


def _step(element: ET.Element, where: str, source: str) -> MscclStep:
    e = _Element(element, source, where)
    if element.tag != "step":
        raise e.fail(f"unexpected element <{element.tag}> inside <tb>")
    index = int(where.rsplit(" ", 1)[1])
    s = e.integer("s", 0, MAX_SCHEDULE_OPS)
    if s != index:
        raise e.fail(f"s={s} but this is step {index} of its tb (steps count 0, 1, 2, ...)")
    kind = e.text("type")
    if kind not in STEP_TYPES:
        raise e.fail(f"step type {kind!r} is not supported (supported: {', '.join(STEP_TYPES)})")
    bufs = []
    for name in ("srcbuf", "dstbuf"):
        buf = e.text(name, "i")
        if buf not in BUFFERS:
            raise e.fail(f"{name}={buf!r} is not a buffer (i, o or s)")
        bufs.append(buf)
    low = -1 if kind == "nop" else 0
    return MscclStep(
        s=s,
        type=kind,
        srcbuf=bufs[0],
        srcoff=e.integer("srcoff", low, MAX_ELEMENTS, default=-1 if kind == "nop" else None),
        dstbuf=bufs[1],
        dstoff=e.integer("dstoff", low, MAX_ELEMENTS, default=-1 if kind == "nop" else None),
        cnt=e.integer("cnt", 0, MAX_ELEMENTS, default=0 if kind == "nop" else None),
        depid=e.integer("depid", -1, MAX_SCHEDULE_OPS, default=-1),
        deps=e.integer("deps", -1, MAX_SCHEDULE_OPS, default=-1),
    )
