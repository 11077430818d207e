"""The one error tree of scaleup.

Every error the library raises on purpose is a :class:`ScaleupError`; the CLI turns each into one
line on stderr and exit code 2 (1 for a schedule that fails verification). Each error carries
where it happened: ``source`` (a file or flag), ``entry`` (an entry inside it), ``rank``, ``op``.

Hierarchy::

    ScaleupError
     ├── InputError                  bad input from a user: files, flags, names
     │    ├── TopologyFileError      a topology TOML file breaks a rule
     │    │    └── UnknownTopologyEntry  ... by naming a device or link the catalog lacks
     │    ├── CatalogFileError       the hardware catalog file breaks a rule
     │    ├── UnknownPreset          no preset of that name
     │    ├── UnknownCatalogEntry    no device / link technology / switch of that name
     │    ├── SpecFileError          a sweep spec or model file breaks a rule
     │    ├── MscclFileError         an MSCCL XML schedule is malformed or uses what scaleup lacks
     │    ├── LogFileError           an nccl-tests / rccl-tests log cannot be read
     │    ├── ProfileFileError       a calibration profile file breaks a rule
     │    ├── JobsFileError          a jobs file (bench --jobs) breaks a rule
     │    ├── UsageError             a flag or argument combination that cannot work
     │    │    └── Unsupported        a valid torch.distributed call this runtime cannot honour
     │    └── LimitError             a size beyond a documented limit or this machine's memory
     ├── ScheduleError               a schedule is malformed or incorrect
     │    ├── UnsupportedCollective  an algorithm cannot express that collective
     │    ├── CycleError             the dependency graph has a cycle
     │    ├── UnwrittenReadError     an op reads a chunk nothing has written yet
     │    ├── RaceError              two unordered writes (or a write and a read) to one chunk
     │    ├── BoundsError            a chunk lies outside its buffer
     │    └── PostconditionError     the final buffers are not what the collective promises
     ├── SimulationError             the simulator cannot time this schedule on this topology
     │    ├── NoRouteError           two ranks that must talk have no path
     │    └── EmptySchedule          the event engine was stepped with no event left
     └── ExecutionError              the real runtime failed
          ├── TransportError         a transport could not be set up or used
          ├── RankFailed             a worker raised or died
          ├── RankTimeout            a worker made no progress within the timeout
          └── Interrupted            the launcher got SIGINT or SIGTERM; every rank was stopped
"""

from __future__ import annotations

__all__ = [
    "BoundsError",
    "CatalogFileError",
    "CycleError",
    "EmptySchedule",
    "ExecutionError",
    "InputError",
    "JobsFileError",
    "Interrupted",
    "LimitError",
    "MscclFileError",
    "LogFileError",
    "NoRouteError",
    "PostconditionError",
    "ProfileFileError",
    "RaceError",
    "RankFailed",
    "RankTimeout",
    "ScaleupError",
    "ScheduleError",
    "SimulationError",
    "SpecFileError",
    "TopologyFileError",
    "TransportError",
    "UnknownCatalogEntry",
    "UnknownPreset",
    "UnknownTopologyEntry",
    "Unsupported",
    "UnsupportedCollective",
    "UnwrittenReadError",
    "UsageError",
]


class ScaleupError(Exception):
    """Base of every error scaleup raises on purpose.

    Parameters
    ----------
    message
        The rule that was broken, in one sentence.
    source
        The file, flag or preset the problem is in, if any.
    entry
        The entry inside ``source`` (a device id, a link, a TOML key), if any.
    rank
        The rank concerned, if any.
    op
        The schedule op concerned (its id), if any.
    """

    def __init__(
        self,
        message: str,
        *,
        source: str | None = None,
        entry: str | None = None,
        rank: int | None = None,
        op: int | None = None,
    ) -> None:
        self.message = message
        self.source = source
        self.entry = entry
        self.rank = rank
        self.op = op
        super().__init__(self.one_line())

    def one_line(self) -> str:
        """The error as one line: ``source: entry: message``."""
        parts = [p for p in (self.source, self.entry) if p]
        if self.rank is not None and "rank" not in self.message:
            parts.append(f"rank {self.rank}")
        if self.op is not None and f"op {self.op}" not in self.message:
            parts.append(f"op {self.op}")
        return ": ".join([*parts, self.message])


class InputError(ScaleupError):
    """Bad input from a user: a file, a flag or a name."""


class TopologyFileError(InputError):
    """A topology TOML file breaks a rule of the format."""


class CatalogFileError(InputError):
    """The hardware catalog file breaks a rule (a missing source, an unknown field, ...)."""


class UnknownPreset(InputError):
    """No topology preset of that name."""


class UnknownCatalogEntry(InputError):
    """No accelerator, switch, host, NIC or link technology of that name in the catalog."""


class UnknownTopologyEntry(TopologyFileError, UnknownCatalogEntry):
    """A topology names a device type or link technology that the catalog does not have."""


class SpecFileError(InputError):
    """A sweep spec or a model file breaks a rule."""


class MscclFileError(InputError):
    """An MSCCL XML schedule (msccl-tools, TACCL, RCCL's files) is malformed, or uses a step type
    or feature scaleup cannot express; ``entry`` names the element (gpu/tb/step)."""


class LogFileError(InputError):
    """An nccl-tests / rccl-tests log cannot be read: missing, empty, malformed, no rows."""


class ProfileFileError(InputError):
    """A calibration profile TOML file breaks a rule."""


class JobsFileError(InputError):
    """A jobs file (``scaleup bench --jobs``) breaks a rule; ``entry`` names the job."""


class UsageError(InputError):
    """A flag or combination of arguments that cannot work."""


class Unsupported(UsageError):
    """A call valid in torch.distributed that this runtime cannot honour (e.g. a subgroup of
    ranks); the message says what to do instead."""


class LimitError(InputError):
    """A size beyond a documented limit (:mod:`scaleup.limits`) or this machine's free memory."""


class ScheduleError(ScaleupError):
    """A schedule is malformed, or does not implement its collective."""


class UnsupportedCollective(ScheduleError):
    """The algorithm cannot express that collective (or that world size)."""


class CycleError(ScheduleError):
    """The dependencies between ops form a cycle."""


class UnwrittenReadError(ScheduleError):
    """An op reads a chunk that no earlier op (nor the precondition) has written."""


class RaceError(ScheduleError):
    """Two ops touch one chunk, at least one writing, with no order between them."""


class BoundsError(ScheduleError):
    """A chunk lies outside its buffer."""


class PostconditionError(ScheduleError):
    """The buffers after the schedule are not what the collective promises."""


class SimulationError(ScaleupError):
    """The simulator cannot time this schedule on this topology."""


class NoRouteError(SimulationError):
    """Two ranks that exchange data have no path between them."""


class EmptySchedule(SimulationError):
    """The event engine's ``step()`` was called with no event left."""


class ExecutionError(ScaleupError):
    """The real, multi-process runtime failed."""


class TransportError(ExecutionError):
    """A transport could not be set up or used."""


class RankFailed(ExecutionError):
    """A worker raised an exception or died."""


class RankTimeout(ExecutionError):
    """A worker made no progress within the timeout; ``rank`` is that (hung) worker."""


class Interrupted(ExecutionError):
    """The launcher was stopped by a signal (SIGINT, SIGTERM); no rank is to blame.

    ``signum`` is the signal; ``exit_code`` is ``128 + signum``, as a shell reports a process
    killed by it (130 for SIGINT, 143 for SIGTERM), so the CLI exits with it.
    """

    def __init__(self, message: str, *, signum: int, source: str | None = None) -> None:
        super().__init__(message, source=source)
        self.signum = signum
        self.exit_code = 128 + signum
