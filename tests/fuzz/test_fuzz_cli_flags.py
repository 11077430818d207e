"""Fuzz the flags of ``bench``, ``topo show``, ``schedule show/verify`` and ``plan``.

Every flag gets valid small values, numbers at and past every width (``--seed -1``,
``--channels 1000000``, ``-f inf``), sizes and long or odd text. Each run must end in one line
and exit 0, 1 or 2, within 10 s and 1 GiB (:func:`fuzz_support.run_cli`). The topologies are
small (fuzzing their names is :mod:`test_fuzz_presets`' job) so that valid runs stay cheap.
"""

from __future__ import annotations

import pytest
from fuzz_support import EXAMPLES, fuzz, run_cli
from hypothesis import strategies as st
from strategies_fuzz import cli_text, flag_args, nasty_number_text, size_text

from scaleup.collectives.algorithms import ALGORITHMS
from scaleup.collectives.spec import COLLECTIVES, DTYPES, REDOPS

_SMALL_TOPOLOGIES = ("dgx-h100", "pcie-8", "h100-nvl-pair", "mi300x-8", "2xh100-nvl-pair")
_NUMBER = nasty_number_text()


def _choice(*known: str) -> st.SearchStrategy[str]:
    """A known name most of the time, else any text."""
    return st.one_of(st.sampled_from(known), cli_text())


_TOPOLOGY = _choice(*_SMALL_TOPOLOGIES)
_OP = _choice(*COLLECTIVES)
_DTYPE = _choice(*DTYPES)
_REDOP = _choice(*REDOPS)
_BENCH_REDOP = _choice(*REDOPS, "avg")
_ALGO = _choice(*ALGORITHMS)
# -b and -e are always given (the default -e 8G sweeps 31 sizes): a small range or nasty ones.
_RANGE = st.one_of(
    st.sampled_from((("8", "8"), ("1K", "4K"), ("1M", "1M"), ("0", "0"))),
    st.tuples(size_text(), size_text()),
)

_BENCH = flag_args(
    {
        "-f": _NUMBER,
        "--op": _OP,
        "--collective": _OP,
        "-d": _DTYPE,
        "-o": _BENCH_REDOP,
        "-r": _NUMBER,
        "--ranks": _NUMBER,
        "--algo": _ALGO,
        "--proto": _choice("ll", "ll128", "simple"),
        "--channels": _NUMBER,
        "--tuner": _choice("nccl", "all"),
        "--select": _choice("nccl-model", "fastest"),
        "--no-p2p": None,
        "--topology": _TOPOLOGY,
        "--json": None,
        "--csv": None,
        "-n": _NUMBER,
        "--iters": _NUMBER,
        "-w": _NUMBER,
        "-c": _NUMBER,
        "-g": _NUMBER,
    }
)
_SCHEDULE_COMMON = {
    "--channels": _NUMBER,
    "--chunks": _NUMBER,
    "--ranks-per-node": _NUMBER,
    "--shot": _NUMBER,
    "--root": _NUMBER,
    "--redop": _REDOP,
    "--dtype": _DTYPE,
    "--bidirectional": None,
}
_SCHEDULE_FLAGS = {
    "show": flag_args({**_SCHEDULE_COMMON, "--limit": _NUMBER, "--json": None}),
    "verify": flag_args({**_SCHEDULE_COMMON, "--seed": _NUMBER}),
}
_PLAN = flag_args(
    {
        "--tp": _NUMBER,
        "--pp": _NUMBER,
        "--dp": _NUMBER,
        "--ep": _NUMBER,
        "--zero": _NUMBER,
        "--seq": _NUMBER,
        "--mbs": _NUMBER,
        "--gbs": _NUMBER,
        "--vpp": _NUMBER,
        "--grad-bytes": _NUMBER,
        "--compute-efficiency": _NUMBER,
        "--overlap": _choice("none", "dp", "all"),
        "--recompute": _choice("none", "selective", "full"),
        "--reserve": size_text(),
        "--no-sp": None,
    }
)


def _bench() -> st.SearchStrategy[list[str]]:
    return st.builds(lambda r, rest: ["bench", "-b", r[0], "-e", r[1], *rest], _RANGE, _BENCH)


def _topo_show() -> st.SearchStrategy[list[str]]:
    return st.builds(
        lambda t, json: ["topo", "show", t, *(["--json"] if json else [])], _TOPOLOGY, st.booleans()
    )


def _schedule() -> st.SearchStrategy[list[str]]:
    # ranks and count small or nasty: a 1,000-rank schedule is valid and slow to verify
    ranks = st.one_of(st.integers(1, 9).map(str), _NUMBER)
    count = st.one_of(st.integers(0, 100).map(str), size_text())
    return st.one_of(
        st.builds(
            lambda algo, op, n, c, rest, cmd=cmd: (
                ["schedule", cmd, algo, op, "-n", n, "-c", c] + rest
            ),
            _ALGO,
            _OP,
            ranks,
            count,
            flags,
        )
        for cmd, flags in _SCHEDULE_FLAGS.items()
    )


def _plan() -> st.SearchStrategy[list[str]]:
    models = _choice("llama-3-8b", "llama-3-70b", "mixtral-8x7b")
    return st.builds(
        lambda m, rest: ["plan", "--model", m, "-t", "h100-nvl-pair", *rest], models, _PLAN
    )


@pytest.mark.parametrize("examples", EXAMPLES)
def test_fuzz_cli_flags(examples: int) -> None:
    fuzz(st.one_of(_bench(), _topo_show(), _schedule(), _plan()), run_cli, examples)
