"""Several jobs sharing one fabric (``scaleup bench --jobs jobs.toml``): each alone, all together.

A jobs file lists collectives that run at the same time on one topology, each on its own ranks::

    [[job]]
    name = "tp0"                 # unique
    collective = "all_reduce"    # a collective name (scaleup.collectives.spec.COLLECTIVES)
    ranks = "0-7"                # accelerator indices: a list [0, 1, 2] or ranges "0-3,8-11"
    size = "1G"                  # bytes, as -b takes them (powers of 1024) or an integer
    dtype = "float32"            # optional (default float32); redop, root likewise
    algorithm = "ring"           # optional: default the tuner's choice for the job alone
    protocol = "simple"          # optional, likewise
    channels = 8                 # optional, likewise
    start_us = 0.0               # optional: when the job starts, after the first

**Ranks may overlap.** Two jobs on one accelerator are two communicators there: each has its own
thread blocks (channels) but they share the accelerator's HBM, links and NIC, as concurrent NCCL
communicators do. Within a job the ranks are distinct; rank ``r`` of the job runs on accelerator
``ranks[r]``.

Each job is first tuned alone on its ranks (:meth:`~scaleup.tune.TuneSession.sweep` with its
group: what NCCL would pick, unless the file pins algorithm, protocol or channels), its schedule
built for that choice at the job's element count, and timed alone. Then every job's schedule is
merged into one and simulated together (:func:`scaleup.sim.together.run_together`): one max-min
fair system over all their flows. A job's time together runs from its start to its last op's
end. The simulator runs one protocol per run, so jobs whose choices differ in protocol (or
pipelining step) are each read from a run of all jobs under their own; exact when they agree.

Bad input raises :class:`~scaleup.errors.JobsFileError` naming the file, the job and the rule.
"""

from __future__ import annotations

import math
import re
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationInfo,
    field_validator,
    model_validator,
)

from scaleup.collectives.spec import COLLECTIVES, DTYPES, PROTOCOL_NAMES, busbw_factor, itemsize
from scaleup.errors import InputError, JobsFileError, ScaleupError, SimulationError
from scaleup.files import parse_toml, read_text, validate
from scaleup.sim.together import JobPart, run_together
from scaleup.topology.model import Topology
from scaleup.tune import BenchRequest, TuneSession
from scaleup.tune.question import Question
from scaleup.tune.rules import Candidate
from scaleup.tune.search import resolve_group
from scaleup.units import GB, parse_size

__all__ = ["Job", "JobRow", "jobs_rows", "load_jobs", "load_jobs_text", "parse_ranks"]

#: The names a jobs file's fields may take.
_KNOWN: dict[str, tuple[str, ...]] = {
    "collective": COLLECTIVES,
    "dtype": tuple(DTYPES),
    "protocol": PROTOCOL_NAMES,
}
_RANGE = re.compile(r"^\s*(\d+)\s*(?:-\s*(\d+)\s*)?$")


def parse_ranks(text: str) -> list[int]:
    """Ranks from ranges: ``"0-3,8"`` -> ``[0, 1, 2, 3, 8]``; ValueError if malformed.

    >>> parse_ranks("0-3,8")
    [0, 1, 2, 3, 8]
    """
    out: list[int] = []
    for piece in text.split(","):
        match = _RANGE.match(piece)
        if match is None:
            raise ValueError(f"not a rank range: {piece.strip()!r} (use e.g. 0-7 or 0-3,8-11)")
        lo, hi = int(match[1]), int(match[2] if match[2] is not None else match[1])
        if hi < lo:
            raise ValueError(f"rank range {lo}-{hi} runs backwards")
        out += range(lo, hi + 1)
    return out


class _JobEntry(BaseModel):
    """One ``[[job]]`` table, as written."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(min_length=1)
    collective: str
    ranks: list[int] | str
    size: int | str
    dtype: str = "float32"
    redop: str = "sum"
    root: int = Field(0, ge=0)
    algorithm: str | None = None
    protocol: str | None = None
    channels: int | None = Field(None, ge=1)
    start_us: float = Field(0.0, ge=0.0, allow_inf_nan=False)

    @field_validator("collective", "dtype", "protocol")
    @classmethod
    def _known(cls, value: str | None, info: ValidationInfo) -> str | None:
        known = _KNOWN[str(info.field_name)]
        if value is not None and value not in known:
            raise ValueError(f"unknown {info.field_name} {value!r}; known: {', '.join(known)}")
        return value

    @field_validator("ranks")
    @classmethod
    def _ranks(cls, value: list[int] | str) -> list[int]:
        ranks = parse_ranks(value) if isinstance(value, str) else list(value)
        if not ranks:
            raise ValueError("a job needs at least one rank")
        if any(r < 0 for r in ranks):
            raise ValueError(f"ranks must be >= 0, got {min(ranks)}")
        if len(set(ranks)) != len(ranks):
            raise ValueError("a job's ranks must be distinct (jobs may share ranks, one job not)")
        return ranks

    @field_validator("size")
    @classmethod
    def _size(cls, value: int | str) -> int:
        try:
            return parse_size(value)
        except ScaleupError as error:
            raise ValueError(error.message) from None


class _JobsFile(BaseModel):
    """The whole file: a non-empty list of jobs with unique names."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    job: list[_JobEntry] = Field(min_length=1)

    @model_validator(mode="after")
    def _unique(self) -> _JobsFile:
        seen: set[str] = set()
        for entry in self.job:
            if entry.name in seen:
                raise ValueError(f"two jobs are named {entry.name!r}; names must be unique")
            seen.add(entry.name)
        return self


@dataclass(frozen=True)
class Job:
    """One validated job: what runs (collective, size, dtype, ...), on which accelerators, when,
    and what is pinned (None: the tuner's choice for the job alone)."""

    name: str
    collective: str
    ranks: tuple[int, ...]
    size_bytes: int
    dtype: str = "float32"
    redop: str = "sum"
    root: int = 0
    algorithm: str | None = None
    protocol: str | None = None
    channels: int | None = None
    start_s: float = 0.0

    def request(self) -> BenchRequest:
        """The job as the tuner's question (one size, on ``len(ranks)`` ranks)."""
        return BenchRequest(
            op=self.collective, sizes_bytes=(self.size_bytes,), dtype=self.dtype,
            redop=self.redop, root=self.root, ranks=len(self.ranks), algorithm=self.algorithm,
            protocol=self.protocol, channels=self.channels,
        )  # fmt: skip


def load_jobs_text(text: str, topology: Topology, source: str = "<jobs>") -> list[Job]:
    """The jobs of a jobs file's text, checked against ``topology`` (ranks in range)."""
    data = parse_toml(text, JobsFileError, source)
    entries = validate(_JobsFile, data, JobsFileError, source).job
    n_acc = len(topology.accelerators)
    jobs = []
    for i, e in enumerate(entries):
        ranks = e.ranks if isinstance(e.ranks, list) else parse_ranks(e.ranks)  # validated: list
        size = e.size if isinstance(e.size, int) else parse_size(e.size)  # validated: int
        bad = [r for r in ranks if r >= n_acc]
        if bad:
            raise JobsFileError(
                f"rank {bad[0]} out of range: {topology.name} has accelerators 0..{n_acc - 1}",
                source=source, entry=f"job[{i}].ranks",
            )  # fmt: skip
        jobs.append(Job(
            e.name, e.collective, tuple(ranks), size, e.dtype, e.redop, e.root, e.algorithm,
            e.protocol, e.channels, e.start_us / 1e6,
        ))  # fmt: skip
    return jobs


def load_jobs(path: str | Path, topology: Topology) -> list[Job]:
    """The jobs of the file at ``path`` (see the module docstring), checked against
    ``topology``; :class:`~scaleup.errors.JobsFileError` naming the file, job and rule if not."""
    return load_jobs_text(read_text(path, JobsFileError), topology, str(path))


@dataclass(frozen=True)
class JobRow:
    """One job's line of the report: what ran, alone and together."""

    name: str
    collective: str
    ranks: tuple[int, ...]
    bytes: int
    dtype: str
    algo: str
    proto: str
    channels: int
    start_us: float
    alone_us: float
    together_us: float
    busbw_alone_gb_per_s: float
    busbw_together_gb_per_s: float

    @property
    def slowdown(self) -> float:
        """Time together / time alone (1.0: the others cost this job nothing)."""
        return self.together_us / self.alone_us if self.alone_us > 0 else 1.0

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready fields (``--json``, ``--csv``), the slowdown included."""
        return {
            "name": self.name, "collective": self.collective, "ranks": list(self.ranks),
            "nranks": len(self.ranks), "bytes": self.bytes, "dtype": self.dtype,
            "algo": self.algo, "proto": self.proto, "channels": self.channels,
            "start_us": self.start_us, "alone_us": self.alone_us,
            "together_us": self.together_us, "slowdown": self.slowdown,
            "busbw_alone_gb_per_s": self.busbw_alone_gb_per_s,
            "busbw_together_gb_per_s": self.busbw_together_gb_per_s,
        }  # fmt: skip


@dataclass(frozen=True)
class _Planned:
    """A job tuned and built: its part of the merge, its choice and its printed size."""

    part: JobPart
    algorithm: str
    protocol: str
    channels: int
    nbytes: int
    step_bytes: float | None


def _plan(topology: Topology, job: Job, session: TuneSession) -> _Planned:
    """Tune ``job`` alone on its ranks and build the chosen schedule at its element count."""
    request = job.request()
    choice = session.sweep(topology, request, group=job.ranks)[0]
    nbytes, _printed_count, count = request.printed(len(job.ranks))[0]
    group = resolve_group(topology, request, job.ranks)
    key = (job.collective, group, job.dtype, request.spec_redop, request.spec_root)
    question = Question(session, topology, key)
    schedule = question.build(choice.algorithm, count, choice.channels, choice.chunks)
    part = JobPart(schedule, job.ranks, itemsize(job.dtype), job.start_s)
    cand = Candidate(choice.algorithm, choice.protocol, choice.channels)
    step = question.step_bytes(cand, nbytes)
    return _Planned(part, choice.algorithm, choice.protocol, choice.channels, nbytes, step)


def jobs_rows(
    topology: Topology,
    jobs: list[Job],
    *,
    session: TuneSession | None = None,
    source: str = "jobs",
) -> list[JobRow]:
    """Every job timed alone and all together on ``topology``, one :class:`JobRow` each.

    Parameters
    ----------
    topology
        The shared fabric.
    jobs
        From :func:`load_jobs`.
    session
        The tuning session (default a new one).
    source
        The jobs file, named by errors about one job (the tuner refusing its pins, ...).

    Examples
    --------
    >>> from scaleup.topology import resolve_topology
    >>> topo = resolve_topology("dgx-h100")
    >>> jobs = [Job("a", "all_gather", (0, 1, 2, 3), 1 << 26, algorithm="ring"),
    ...         Job("b", "all_gather", (4, 5, 6, 7), 1 << 26, algorithm="ring")]
    >>> [round(row.slowdown, 6) for row in jobs_rows(topo, jobs)]
    [1.0, 1.0]
    """
    session = session or TuneSession()
    planned = []
    for i, job in enumerate(jobs):
        try:
            planned.append(_plan(topology, job, session))
        except (InputError, SimulationError) as error:
            raise JobsFileError(
                error.message, source=source, entry=f"job[{i}] ({job.name})"
            ) from None
    parts = [p.part for p in planned]
    net = session.network(topology)
    alone = [
        run_together(topology, [p.part], protocol_name=p.protocol, step_bytes=p.step_bytes,
                     network=net)[0]
        for p in planned
    ]  # fmt: skip
    runs: dict[tuple[str, float | None], list[int]] = defaultdict(list)
    for j, p in enumerate(planned):
        runs[(p.protocol, p.step_bytes)].append(j)
    together = [math.nan] * len(jobs)
    for (proto, step), members in runs.items():
        try:
            times = run_together(topology, parts, protocol_name=proto, step_bytes=step, network=net)
        except SimulationError as error:
            names = ", ".join(jobs[j].name for j in members)
            raise JobsFileError(
                f'{error.message}: pin protocol = "{proto}" on every job, or none on {names}',
                source=source,
            ) from None
        for j in members:
            together[j] = times[j]
    return [
        _row(job, p, alone_s, together_s)
        for job, p, alone_s, together_s in zip(jobs, planned, alone, together, strict=True)
    ]


def _busbw(job: Job, nbytes: int, time_s: float) -> float:
    if time_s <= 0:
        return 0.0
    return nbytes / time_s / GB * busbw_factor(job.collective, len(job.ranks))


def _row(job: Job, p: _Planned, alone_s: float, together_s: float) -> JobRow:
    return JobRow(
        job.name, job.collective, job.ranks, p.nbytes, job.dtype, p.algorithm, p.protocol,
        p.channels, job.start_s * 1e6, alone_s * 1e6, together_s * 1e6,
        _busbw(job, p.nbytes, alone_s), _busbw(job, p.nbytes, together_s),
    )  # fmt: skip
