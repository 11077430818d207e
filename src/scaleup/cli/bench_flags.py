"""``scaleup bench``'s flags and NCCL's environment, mapped to one BenchRequest.

nccl-tests' ``-o/--op`` (the reduction, or scaleup's old collective spelling) and ``--collective``
are read by :func:`split_op`; the flags become a :class:`BenchFlags` record, and
:func:`request_from_flags` is the one place they become a
:class:`~scaleup.tune.request.BenchRequest`. The library's errors name fields; :func:`flag_errors`
reports them with the flag that sets the field (:data:`FLAG_OF`).
"""

from __future__ import annotations

import contextlib
import math
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from scaleup.cli.bench_table import SweepArgs
from scaleup.collectives.spec import COLLECTIVES
from scaleup.errors import UsageError
from scaleup.units import parse_size

if TYPE_CHECKING:
    from scaleup.sim.straggler import Stragglers
    from scaleup.topology.model import Topology
    from scaleup.tune import BenchRequest
    from scaleup.tune.nccl_env import NcclEnv

__all__ = [
    "DEFAULT_TOPOLOGY",
    "FLAG_OF",
    "REDOPS",
    "BenchFlags",
    "check_mode",
    "flag_errors",
    "nccl_env_of",
    "nccl_header",
    "plugin_env",
    "plugin_header",
    "request_from_flags",
    "split_op",
    "split_topologies",
    "straggler_header",
    "stragglers_of",
]

#: Default fabric of the simulated table.
DEFAULT_TOPOLOGY = "dgx-h100"
#: BenchRequest field (an error's ``source``) -> the flag that sets it.
FLAG_OF = {
    "op": "--collective",
    "sizes_bytes": "-b/-e",
    "min_bytes/max_bytes": "-b/-e",
    "factor": "-f",
    "dtype": "-d",
    "redop": "-o",
    "root": "-r",
    "ranks": "-g",
    "algorithm": "--algo",
    "protocol": "--proto",
    "channels": "--channels",
    "family": "--tuner",
    "selection": "--select",
    "runtime": "--runtime",
    "algorithms": "NCCL_ALGO",
    "protocols": "NCCL_PROTO",
    "min_channels": "NCCL_MIN_NCHANNELS",
    "max_channels": "NCCL_MAX_NCHANNELS",
}
#: The NCCL variables a flag takes precedence over.
_FLAG_OVERRIDES = {
    "--algo": ("NCCL_ALGO", "NCCL_NVLS_ENABLE"),
    "--proto": ("NCCL_PROTO",),
    "--channels": ("NCCL_MIN_NCHANNELS", "NCCL_MAX_NCHANNELS"),
}


def split_topologies(text: str) -> list[str]:
    """Split ``--topology a,b`` on commas, keeping ``name:k=v,k2=v2`` parameters together.

    >>> split_topologies("dgx-h100,ualink-pod:n=64,planes=8,pcie-8")
    ['dgx-h100', 'ualink-pod:n=64,planes=8', 'pcie-8']
    """
    out: list[str] = []
    for piece in (p.strip() for p in text.split(",")):
        if not piece:
            continue
        if out and ":" in out[-1] and re.match(r"^[A-Za-z_]\w*=", piece):
            out[-1] += "," + piece
        else:
            out.append(piece)
    if not out:
        raise UsageError("--topology is empty", source="--topology")
    return out


#: nccl-tests' reductions (``-o``); ``mulsum`` and ``all`` are not offered (README).
REDOPS = ("sum", "prod", "max", "min", "avg")
#: nccl-tests' binary names that differ from scaleup's collective names.
_BINARY_NAMES = {"alltoall": "all_to_all", "sendrecv": "send_recv"}


def _collective_name(text: str) -> str | None:
    """The collective ``text`` names (scaleup's name or nccl-tests' binary, ``all_gather_perf``),
    else None."""
    name = text.strip().lower().removesuffix("_perf")
    name = _BINARY_NAMES.get(name, name)
    return name if name in COLLECTIVES else None


def split_op(values: list[str] | None, collective: str | None) -> tuple[str, str]:
    """(collective, reduction) from ``-o/--op`` (given any number of times) and ``--collective``.

    nccl-tests' ``-o`` is the reduction; scaleup's ``--op`` used to be the collective, so a
    collective name there still selects it (the two name sets are disjoint).

    >>> split_op(["reduce", "max"], None), split_op(None, "all_gather_perf")
    (('reduce', 'max'), ('all_gather', 'sum'))
    """
    chosen = None
    if collective is not None:
        chosen = _collective_name(collective)
        if chosen is None:
            raise UsageError(
                f"unknown collective {collective!r}; known: {', '.join(COLLECTIVES)} "
                "(or nccl-tests' binary names, all_reduce_perf ...)",
                source="--collective",
            )
    redop = None
    for value in values or []:
        if value.strip().lower() in REDOPS:
            if redop is not None:
                raise UsageError("-o/--op gives the reduction twice", source="-o")
            redop = value.strip().lower()
            continue
        named = _collective_name(value)
        if named is None:
            raise UsageError(
                f"unknown reduction {value!r}; known: {', '.join(REDOPS)} "
                f"(the collective is --collective: {', '.join(COLLECTIVES)})",
                source="-o",
            )
        if chosen is not None and named != chosen:
            raise UsageError(
                f"two collectives, {chosen} and {named}; give one with --collective",
                source="--collective",
            )
        chosen = named
    return chosen or "all_reduce", redop or "sum"


@contextlib.contextmanager
def flag_errors(flag_of: dict[str, str]) -> Iterator[None]:
    """Re-raise a UsageError whose source is a library field with the flag that sets it."""
    try:
        yield
    except UsageError as error:
        flag = flag_of.get(error.source or "")
        if flag is None:
            raise
        raise type(error)(error.message, source=flag, entry=error.entry) from None


@dataclass(frozen=True)
class BenchFlags:
    """The flags of one ``scaleup bench`` call, as typed."""

    min_bytes: str
    max_bytes: str
    factor: float
    op: str
    dtype: str
    redop: str
    root: int
    ranks: int | None
    algo: str | None
    proto: str | None
    channels: int | None
    tuner: str | None
    no_p2p: bool
    topology: str | None
    runtime: str | None
    iters: int | None
    warmup: int | None
    check: int = 1
    explain: bool = False
    exact: bool = False
    environ: Mapping[str, str] | None = None  # NCCL_* are read from it (simulator only)
    profile: Path | None = None  # a calibration profile (scaleup calibrate) applied to every fabric
    stragglers: tuple[str, ...] = ()  # --straggler RANK=F, as typed
    skew_us: tuple[str, ...] = ()  # --skew-us RANK=US, as typed
    fail_links: tuple[str, ...] = ()  # --fail-link A-B, each applied to every fabric
    degrades: tuple[str, ...] = ()  # --degrade A-B=F, each applied to every fabric
    selection: str | None = None  # --select fastest|nccl-model (None: the library's default)


def _rank_numbers(items: tuple[str, ...], flag: str, rule: str, least: float) -> dict[int, float]:
    """``RANK=NUMBER`` items of a repeatable flag, by rank; every number finite and >= ``least``
    (else a :class:`~scaleup.errors.UsageError` naming ``flag`` and ``rule``)."""
    out: dict[int, float] = {}
    for item in items:
        rank, sep, text = item.partition("=")
        if not sep or not rank.strip().isdigit() or not text.strip():
            raise UsageError(f"expected RANK=VALUE (e.g. 1=1.3), got {item!r}", source=flag)
        if int(rank) in out:
            raise UsageError(f"rank {int(rank)} is given twice", source=flag)
        try:
            value = float(text)
        except ValueError:
            value = math.nan
        if not (math.isfinite(value) and value >= least):
            raise UsageError(f"{rule}, got {text.strip()!r} for rank {int(rank)}", source=flag)
        out[int(rank)] = value
    return out


def stragglers_of(flags: BenchFlags) -> Stragglers | None:
    """``--straggler RANK=F`` and ``--skew-us RANK=US`` as one
    :class:`~scaleup.sim.straggler.Stragglers`; None when neither is given. A malformed item, a
    value that is not a number, F < 1 or a negative skew raise
    :class:`~scaleup.errors.UsageError` naming the flag (a rank beyond the collective's is
    refused when it is run)."""
    from scaleup.sim.straggler import Stragglers

    if not flags.stragglers and not flags.skew_us:
        return None
    factors = _rank_numbers(
        flags.stragglers, "--straggler", "a straggler factor F must be a number >= 1", 1.0
    )
    skew_us = _rank_numbers(
        flags.skew_us, "--skew-us", "a start skew must be a number of microseconds >= 0", 0.0
    )
    return Stragglers(factors=factors, skew_s={r: us * 1e-6 for r, us in skew_us.items()})


def straggler_header(flags: BenchFlags) -> list[str]:
    """The header line naming the stragglers and skews applied; none when none is given."""
    stragglers = stragglers_of(flags)
    if stragglers is None:
        return []
    return [f"# Stragglers applied: {stragglers.describe()}"]


def nccl_env_of(flags: BenchFlags) -> tuple[NcclEnv, list[str]]:
    """NCCL's variables in ``flags.environ`` less those a given flag overrides, and the notes
    ``VAR (--flag)`` of the overridden ones. Empty with ``--runtime`` (NCCL is not running)."""
    from scaleup.tune.nccl_env import NcclEnv, read_nccl_env

    if flags.runtime is not None or flags.environ is None:
        return NcclEnv(), []
    given = {"--algo": flags.algo, "--proto": flags.proto, "--channels": flags.channels}
    dropped = {
        var: flag
        for flag, value in given.items()
        if value is not None
        for var in _FLAG_OVERRIDES[flag]
        if var in flags.environ
    }
    kept = {k: v for k, v in flags.environ.items() if k not in dropped}
    return read_nccl_env(kept), [f"{var} ({flag})" for var, flag in dropped.items()]


def nccl_header(flags: BenchFlags) -> list[str]:
    """The header line naming the NCCL variables applied; none when no variable is set."""
    env, overridden = nccl_env_of(flags)
    if not env.applied and not overridden:
        return []
    applied = " ".join(f"{k}={v}" for k, v in env.applied.items()) or "none"
    line = f"# NCCL environment applied: {applied}"
    if overridden:
        line += f"; overridden by flags: {', '.join(overridden)}"
    return [line]


def plugin_env(topo: Topology, nranks: int, applied: Mapping[str, str]) -> dict[str, str]:
    """The NCCL variables aws-ofi-nccl sets for the first ``nranks`` ranks of ``topo`` that the
    environment (``applied``) leaves to it (:mod:`scaleup.tune.ofi_env`); none off AWS's EFA."""
    from scaleup.tune.ofi_env import plugin_buffers

    plugin = plugin_buffers(topo, range(nranks)).applied()
    return {k: v for k, v in plugin.items() if k not in applied}


def plugin_header(flags: BenchFlags, topo: Topology, nranks: int) -> list[str]:
    """The header lines of the EFA network plugin: the NCCL sizes aws-ofi-nccl sets on the
    group's AWS platform (:mod:`scaleup.tune.ofi_env`), and that its region tuner takes part (an
    all_reduce on p5 / p5e across more than two nodes, picked as NCCL picks;
    :mod:`scaleup.tune.ofi_tuner`); none elsewhere, so other output stays as it was."""
    from scaleup.tune.ofi_env import ofi_platform
    from scaleup.tune.ofi_tuner import OfiRegionTuner

    if flags.runtime is not None:
        return []
    env, _ = nccl_env_of(flags)
    lines = []
    ranks = range(nranks)
    platform = ofi_platform(topo, ranks)
    if platform is not None:
        kept = plugin_env(topo, nranks, env.applied)
        if kept:
            lines.append(
                f"# Network plugin: aws-ofi-nccl ({platform}) sets "
                + " ".join(f"{k}={v}" for k, v in kept.items())
                + " (a value in the environment takes precedence)"
            )
    as_nccl = flags.selection in (None, "nccl-model") and flags.tuner in (None, "nccl")
    if flags.op != "all_reduce" or not env.net_tuner or not as_nccl:
        return lines
    if OfiRegionTuner.of(topo, ranks) is None:
        return lines
    return [
        *lines,
        "# Tuner plugin: aws-ofi-nccl's region tuner (p5) picks the algorithm and protocol where "
        "its regions cover a size (--explain says where; NCCL_TUNER_PLUGIN=none turns it off)",
    ]


def request_from_flags(flags: BenchFlags) -> tuple[BenchRequest, SweepArgs]:
    """The one place flags become a :class:`~scaleup.tune.request.BenchRequest` (and the header's
    echo of the sweep); ``-g`` is the rank count (processes with ``--runtime``)."""
    from scaleup.tune import BenchRequest, nccl_sizes

    lo, hi = parse_size(flags.min_bytes, source="-b"), parse_size(flags.max_bytes, source="-e")
    args = SweepArgs(flags.op, lo, hi, flags.factor, flags.dtype)
    nccl, _ = nccl_env_of(flags)
    with flag_errors(FLAG_OF):
        request = BenchRequest(
            op=flags.op,
            sizes_bytes=tuple(nccl_sizes(lo, hi, flags.factor)),
            dtype=flags.dtype,
            redop=flags.redop,
            root=flags.root,
            ranks=flags.ranks,
            algorithm=flags.algo,
            protocol=flags.proto,
            channels=flags.channels,
            family=flags.tuner or "nccl",
            algorithms=nccl.algorithms,
            protocols=nccl.protocols,
            min_channels=nccl.min_channels,
            max_channels=nccl.max_channels,
            ll128_c2c=nccl.ll128_c2c,
            net_tuner=nccl.net_tuner,
            buffers=nccl.buffers,
            **({} if flags.selection is None else {"selection": flags.selection}),
        )
    return request, args


def check_mode(flags: BenchFlags) -> None:
    """Check nccl-tests' counts, and refuse the simulator's flags with ``--runtime`` (one line)."""
    if flags.iters is not None and flags.iters < 1:
        raise UsageError(f"iterations must be >= 1, got {flags.iters}", source="-n")
    if flags.warmup is not None and flags.warmup < 0:
        raise UsageError(f"warm-up iterations must be >= 0, got {flags.warmup}", source="-w")
    if flags.check not in (0, 1):
        raise UsageError(f"-c takes 0 (no check) or 1 (check), got {flags.check}", source="-c")
    if flags.runtime is None:
        return
    sim_only = {
        "--topology": flags.topology is not None,
        "--proto": flags.proto is not None,
        "--channels": flags.channels is not None,
        "--tuner": flags.tuner is not None,
        "--select": flags.selection is not None,
        "--no-p2p": flags.no_p2p,
        "--explain": flags.explain,
        "--exact": flags.exact,
        "--profile": flags.profile is not None,
        "--straggler": bool(flags.stragglers),
        "--skew-us": bool(flags.skew_us),
        "--fail-link": bool(flags.fail_links),
        "--degrade": bool(flags.degrades),
    }
    given = [flag for flag, is_given in sim_only.items() if is_given]
    if given:
        raise UsageError(
            f"{given[0]} applies to the simulator; --runtime measures this machine's processes "
            "(-g sets their number)",
            source=given[0],
        )
    if flags.ranks is None or flags.ranks < 1:
        raise UsageError("--runtime needs -g N (N >= 1 processes)", source="-g")
