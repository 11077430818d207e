"""NCCL's tuning environment variables, read with NCCL's syntax, as tuner overrides.

``NCCL_ALGO`` and ``NCCL_PROTO`` are comma-separated, case-insensitive lists of NCCL's names; a
leading ``^`` excludes the names listed instead of keeping only them. ``NCCL_MIN_NCHANNELS`` and
``NCCL_MAX_NCHANNELS`` bound the channel count (NCCL clamps its count into the range, so the
tuner's channel counts are clamped the same way), ``NCCL_NVLS_ENABLE=0`` turns NVLS and
NVLSTree off, and ``NCCL_LL128_C2C=0`` turns LL128 off across servers of accelerators hosted over
NVLink-C2C (:func:`scaleup.tune.rules.enabled_protocols`; NCCL before 2.27 never ran it there).
``NCCL_TUNER_PLUGIN=none`` (NCCL's word for no tuner plugin, src/plugin/tuner.cc line 60) or
aws-ofi-nccl's ``OFI_NCCL_TUNER_TYPE=Internal`` turn off the EFA plugin's region tuner
(:mod:`scaleup.tune.ofi_tuner`), which is on by default where it applies; a plugin name must be
aws-ofi-nccl's (one containing ``ofi``, e.g. ``libnccl-ofi-tuner.so``), the only one modelled.
``NCCL_BUFFSIZE``, ``NCCL_P2P_NET_CHUNKSIZE``, ``NCCL_NVLS_CHUNKSIZE`` and
``NCCL_NVLSTREE_MAX_CHUNKSIZE`` set the steps pipelines move (:mod:`scaleup.tune.nccl_buffers`),
over what the EFA plugin sets (:mod:`scaleup.tune.ofi_env`).
:func:`read_nccl_env` turns a mapping (``os.environ``) into an :class:`NcclEnv`, which
:class:`~scaleup.tune.request.BenchRequest` takes as its ``algorithms``, ``protocols``,
``min_channels``, ``max_channels``, ``ll128_c2c``, ``net_tuner`` and ``buffers`` fields.

Names NCCL has but scaleup does not model (``CollnetDirect``, ``CollnetChain``, ``PAT``) are
accepted: excluding them changes nothing, and including them is an error only when nothing that
scaleup models remains. ``Tree`` also keeps ``hierarchical``, which stands for NCCL's tree across
nodes with chains inside them. A bad value raises a :class:`~scaleup.errors.UsageError` whose
``source`` is the variable's name.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from scaleup.collectives.algorithms import ALGORITHMS
from scaleup.collectives.spec import PROTOCOL_NAMES
from scaleup.errors import UsageError
from scaleup.limits import MAX_CHANNELS
from scaleup.tune.nccl_buffers import NCCL_BUFFER_VARS, NcclBuffers, read_nccl_buffers

__all__ = ["NCCL_ALGO_NAMES", "NCCL_ENV_VARS", "NCCL_PROTO_NAMES", "NcclEnv", "read_nccl_env"]

#: NCCL's algorithm names (lower case) -> the scaleup algorithms they stand for (none: unmodelled).
NCCL_ALGO_NAMES: dict[str, tuple[str, ...]] = {
    "ring": ("ring",),
    "tree": ("tree", "hierarchical"),
    "nvls": ("nvls",),
    "nvlstree": ("nvls_tree",),
    "collnetdirect": (),
    "collnetchain": (),
    "pat": (),
}
#: NCCL's spelling of each algorithm name, for messages.
_ALGO_SPELLING = ("Ring", "Tree", "NVLS", "NVLSTree", "CollnetDirect", "CollnetChain", "PAT")
#: NCCL's protocol names (lower case) -> scaleup's.
NCCL_PROTO_NAMES: dict[str, str] = {"simple": "simple", "ll": "ll", "ll128": "ll128"}
#: The variables read, in the order the table header names them.
NCCL_ENV_VARS = (
    "NCCL_ALGO",
    "NCCL_PROTO",
    "NCCL_MIN_NCHANNELS",
    "NCCL_MAX_NCHANNELS",
    "NCCL_NVLS_ENABLE",
    "NCCL_LL128_C2C",
    "NCCL_TUNER_PLUGIN",
    "OFI_NCCL_TUNER_TYPE",
    *NCCL_BUFFER_VARS,
)


@dataclass(frozen=True)
class NcclEnv:
    """The tuner overrides NCCL's variables ask for; ``applied`` holds the variables set.

    ``algorithms`` / ``protocols``: the scaleup names allowed (None: no restriction);
    ``min_channels`` / ``max_channels``: the clamp range of the channel count; ``ll128_c2c``:
    LL128 allowed across servers of C2C-hosted accelerators (``NCCL_LL128_C2C``, default 1);
    ``net_tuner``: the network plugin's tuner runs where it applies (``NCCL_TUNER_PLUGIN``,
    ``OFI_NCCL_TUNER_TYPE``); ``buffers``: the buffer and chunk sizes set
    (:class:`~scaleup.tune.nccl_buffers.NcclBuffers`).
    """

    algorithms: frozenset[str] | None = None
    protocols: frozenset[str] | None = None
    min_channels: int | None = None
    max_channels: int | None = None
    applied: dict[str, str] = field(default_factory=dict)
    ll128_c2c: bool = True
    net_tuner: bool = True
    buffers: NcclBuffers = NcclBuffers()

    def without(self, *names: str) -> NcclEnv:
        """This environment less the variables ``names`` (a command-line flag took precedence)."""
        applied = {k: v for k, v in self.applied.items() if k not in names}
        return read_nccl_env(applied)


def _names(
    var: str, value: str, known: Mapping[str, object], spelling: str
) -> tuple[bool, list[str]]:
    """(excluding?, lower-case names) of an NCCL list value, each checked against ``known``."""
    text = value.strip()
    exclude = text.startswith("^")
    names = [n.strip().lower() for n in text.lstrip("^").split(",") if n.strip()]
    if not names:
        raise UsageError(f"{value!r} lists no name; known: {spelling}", source=var)
    for name in names:
        if name not in known:
            raise UsageError(
                f"unknown name {name!r} in {value!r}; known (any case, ^ excludes): {spelling}",
                source=var,
            )
    return exclude, names


def _algorithms(value: str) -> frozenset[str]:
    exclude, names = _names("NCCL_ALGO", value, NCCL_ALGO_NAMES, ", ".join(_ALGO_SPELLING))
    listed = {a for n in names for a in NCCL_ALGO_NAMES[n]}
    if exclude:
        return frozenset(ALGORITHMS) - listed
    if not listed:
        raise UsageError(
            f"{value!r} names only algorithms scaleup does not model; "
            "modelled: Ring, Tree, NVLS, NVLSTree",
            source="NCCL_ALGO",
        )
    return frozenset(listed)


def _protocols(value: str) -> frozenset[str]:
    exclude, names = _names("NCCL_PROTO", value, NCCL_PROTO_NAMES, "Simple, LL, LL128")
    listed = {NCCL_PROTO_NAMES[n] for n in names}
    kept = set(PROTOCOL_NAMES) - listed if exclude else listed
    if not kept:
        raise UsageError(f"{value!r} leaves no protocol", source="NCCL_PROTO")
    return frozenset(kept)


def _channels(var: str, value: str) -> int:
    try:
        n = int(value.strip())
    except ValueError:
        n = 0
    if not 1 <= n <= MAX_CHANNELS:
        raise UsageError(f"{value!r} must be an integer in 1..{MAX_CHANNELS}", source=var)
    return n


def read_nccl_env(env: Mapping[str, str]) -> NcclEnv:
    """The overrides that NCCL's variables in ``env`` ask for (see the module docstring).

    >>> e = read_nccl_env({"NCCL_ALGO": "^nvls,PAT", "NCCL_PROTO": "Simple"})
    >>> sorted(e.algorithms)
    ['allpairs', 'direct', 'hierarchical', 'nvls_tree', 'recursive', 'ring', 'torus', 'tree']
    >>> sorted(e.protocols)
    ['simple']
    >>> read_nccl_env({"NCCL_NVLS_ENABLE": "0", "NCCL_ALGO": "nvls,ring"}).algorithms
    frozenset({'ring'})
    """
    applied = {var: env[var] for var in NCCL_ENV_VARS if var in env}
    algos = _algorithms(applied["NCCL_ALGO"]) if "NCCL_ALGO" in applied else None
    nvls = applied.get("NCCL_NVLS_ENABLE")
    if nvls is not None:
        if nvls.strip() not in ("0", "1", "2"):
            raise UsageError(
                f"{nvls!r} must be 0 (off), 1 (on) or 2 (auto)",
                source="NCCL_NVLS_ENABLE",
            )
        if nvls.strip() == "0":
            algos = (frozenset(ALGORITHMS) if algos is None else algos) - {"nvls", "nvls_tree"}
            if not algos:
                raise UsageError(
                    "NCCL_NVLS_ENABLE=0 removes every algorithm NCCL_ALGO allows",
                    source="NCCL_ALGO",
                )
    protos = _protocols(applied["NCCL_PROTO"]) if "NCCL_PROTO" in applied else None
    lo = (
        _channels("NCCL_MIN_NCHANNELS", applied["NCCL_MIN_NCHANNELS"])
        if ("NCCL_MIN_NCHANNELS" in applied)
        else None
    )
    hi = (
        _channels("NCCL_MAX_NCHANNELS", applied["NCCL_MAX_NCHANNELS"])
        if ("NCCL_MAX_NCHANNELS" in applied)
        else None
    )
    if lo is not None and hi is not None and lo > hi:
        raise UsageError(f"{lo} exceeds NCCL_MAX_NCHANNELS={hi}", source="NCCL_MIN_NCHANNELS")
    c2c = applied.get("NCCL_LL128_C2C", "1").strip()
    if c2c not in ("0", "1"):
        raise UsageError(f"{c2c!r} must be 0 (off) or 1 (on)", source="NCCL_LL128_C2C")
    return NcclEnv(
        algos,
        protos,
        lo,
        hi,
        applied,
        ll128_c2c=c2c == "1",
        net_tuner=_net_tuner(applied),
        buffers=read_nccl_buffers(applied),
    )


def _net_tuner(applied: Mapping[str, str]) -> bool:
    """Whether aws-ofi-nccl's region tuner runs (see the module docstring).

    >>> _net_tuner({}), _net_tuner({"NCCL_TUNER_PLUGIN": "None"})
    (True, False)
    >>> _net_tuner({"NCCL_TUNER_PLUGIN": "/opt/aws-ofi-nccl/lib/libnccl-ofi-tuner.so"})
    True
    """
    plugin = applied.get("NCCL_TUNER_PLUGIN", "").strip()
    if plugin and plugin.lower() != "none" and "ofi" not in plugin.lower():
        raise UsageError(
            f"{plugin!r} names a tuner plugin scaleup does not model; modelled: aws-ofi-nccl's "
            "(a name containing 'ofi', e.g. libnccl-ofi-tuner.so); 'none' turns tuner plugins off",
            source="NCCL_TUNER_PLUGIN",
        )
    raw = applied.get("OFI_NCCL_TUNER_TYPE", "Region").strip()
    kind = raw.lower()
    if kind not in ("region", "internal"):
        raise UsageError(
            f"{raw!r} must be Region (the default) or Internal (NCCL's own tuner); the plugin's "
            "Model tuner is not modelled",
            source="OFI_NCCL_TUNER_TYPE",
        )
    return plugin.lower() != "none" and kind == "region"
