"""The tuner's analytic lower bound (scaleup.tune.bounds) is never above the simulated time.

Checked through the session's own path (``Question.simulate``: the reference structure scaled to
the size, with the pipelined algorithms' ``step_bytes``) for every enabled candidate of presets,
groups of ranks, collectives, sizes and dtypes; and the search that prunes with it builds few
structures and still picks what simulating everything picks.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scaleup.topology import resolve_topology
from scaleup.tune import BenchRequest, TuneSession
from scaleup.tune.bounds import GroupFabric, lower_bound_s
from scaleup.tune.rules import Candidate

SIZES = (0, 8, 1000, 64 * 1024, 3 << 20, 1 << 30)
DTYPES = ("float32", "float16", "int8", "float64")
OPS = ("all_reduce", "all_gather", "reduce_scatter", "broadcast", "reduce", "all_to_all")
_SESSIONS: dict[str, TuneSession] = {}


def _session(preset: str) -> TuneSession:
    """One session per preset for the whole module (its shapes and structures are reused)."""
    if preset not in _SESSIONS:
        _SESSIONS[preset] = TuneSession()
    return _SESSIONS[preset]


def _check(preset: str, data: st.DataObject) -> None:
    topology = resolve_topology(preset)
    n_all = len(topology.accelerators)
    op = data.draw(st.sampled_from(OPS), label="op")
    if data.draw(st.booleans(), label="subset"):
        k = data.draw(st.integers(2, n_all), label="ranks")
        group = data.draw(st.permutations(range(n_all)), label="order")[:k]
        group = sorted(group) if data.draw(st.booleans(), label="sorted") else group
    else:
        group = None
    size = data.draw(st.sampled_from(SIZES), label="size")
    dtype = data.draw(st.sampled_from(DTYPES), label="dtype")
    n = n_all if group is None else len(group)
    root = data.draw(st.integers(0, n - 1), label="root") if op in ("broadcast", "reduce") else 0
    family = data.draw(st.sampled_from(("nccl", "all")), label="family")
    request = BenchRequest(op=op, sizes_bytes=(size,), dtype=dtype, root=root, family=family)
    session = _session(preset)
    search = session._search(topology, request, group, prune=False)
    q = search.question
    fabric = GroupFabric.of(topology, q.group, session.network(topology))
    nbytes, _, count = search.printed[0]
    cand = data.draw(st.sampled_from(search.cands), label="candidate")
    timed = q.simulate(cand, nbytes, count)
    if timed is None:
        return  # not buildable here: the search never uses its bound
    params = q.params(cand.algorithm, cand.channels)
    bound = lower_bound_s(
        topology, q.group, fabric, q.collective, cand, count, params=params, dtype=dtype,
        root=q.root,
    )  # fmt: skip
    assert 0.0 < bound <= timed.time_s, (cand, bound, timed.time_s)


@pytest.mark.parametrize("preset", ["dgx-h100", "dgx1-v100", "mi300x-8"])
@settings(max_examples=25, deadline=None)
@given(data=st.data())
def test_bound_never_beats_the_simulator_on_one_server(preset: str, data: st.DataObject) -> None:
    _check(preset, data)


@pytest.mark.slow
@pytest.mark.parametrize("preset", ["2xdgx-h100", "2xmi300x-8", "gb200-nvl72"])
@settings(max_examples=15, deadline=None)
@given(data=st.data())
def test_bound_never_beats_the_simulator_across_servers(preset: str, data: st.DataObject) -> None:
    _check(preset, data)


@pytest.mark.parametrize(
    ("preset", "most"),
    [("dgx-h100", 4), pytest.param("2xdgx-h100", 8, marks=pytest.mark.slow)],
)
def test_pruning_builds_little_and_keeps_the_choice(preset: str, most: int) -> None:
    topology = resolve_topology(preset)
    request = BenchRequest(sizes_bytes=(1 << 30,))
    session = TuneSession()
    (choice,) = session.sweep(topology, request)
    (question,) = session._questions.values()
    simulated = {(c.algorithm, c.channels) for c, _ in choice.considered}
    built = {(a, ch) for a, ch, _ in question.compiled}
    assert simulated <= built  # built: simulated, or pruned by its structure's congestion bound
    assert len(built) <= most  # of 25 (dgx-h100) / 45 (2xdgx-h100) candidates
    (everything,) = TuneSession().tune(topology, request)
    assert (choice.candidate, choice.time_s) == (everything.candidate, everything.time_s)


def test_bound_examples() -> None:
    """Hand-worked: ring all_reduce of 1 GiB on 8 H100 is link-bound (2 x 7/8 x 1 GiB over 18
    NVLink4 links at 20.6 GB/s, after launch and one NVLink Simple step); nvls is bound by its
    switch links, x 1/0.85 in-switch, after one switch step."""
    t = resolve_topology("dgx-h100")
    fabric = GroupFabric.of(t, None)
    params = TuneSession().shape(t, None).params("ring", 16)
    ring = lower_bound_s(t, None, fabric, "all_reduce", Candidate("ring", "simple", 16),
                         1 << 28, params=params)  # fmt: skip
    launch = 4e-6 + 8.4e-6
    assert ring == pytest.approx(launch + 3.4e-6 + 2 * 7 / 8 * 2**30 / (18 * 20.6e9), rel=1e-6)
    nvls = lower_bound_s(t, None, fabric, "all_reduce", Candidate("nvls", "simple", 16),
                         1 << 28, params={})  # fmt: skip
    assert nvls == pytest.approx(
        4e-6 + 25e-6 + 2**30 * (1 + 1 / 8) / 0.85 / (18 * 20.6e9), rel=1e-6
    )


@pytest.mark.parametrize("preset", ["dgx-h100", "mi300x-8", "2xdgx-h100"])
@pytest.mark.parametrize("size", [64 * 1024, 3 << 20, 100 << 20, 1 << 30])
def test_pipelined_chain_bound_never_beats_the_simulator(preset: str, size: int) -> None:
    """The cut-through term (each hop of a tree's chain holds its successor back for one step's
    bytes at a thread block's rate) stays below the simulated time for every protocol and
    channel count, at sizes where one step, or a chunk smaller than a step, is what a hop moves."""
    topology = resolve_topology(preset)
    session = _session(preset)
    request = BenchRequest(op="all_reduce", sizes_bytes=(size,), algorithm="tree")
    search = session._search(topology, request, None, prune=False)
    q = search.question
    fabric = GroupFabric.of(topology, q.group, session.network(topology))
    nbytes, _, count = search.printed[0]
    for cand in search.cands:
        timed = q.simulate(cand, nbytes, count)
        assert timed is not None
        params = q.params(cand.algorithm, cand.channels)
        bound = lower_bound_s(
            topology, q.group, fabric, q.collective, cand, count, params=params
        )  # fmt: skip
        assert 0.0 < bound <= timed.time_s, (cand, bound, timed.time_s)
