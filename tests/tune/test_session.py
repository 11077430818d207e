"""TuneSession: the tuner's state lives in an explicit object, not in modules."""

from __future__ import annotations

import ast
from pathlib import Path

from scaleup.bench import bench_rows
from scaleup.collectives.algorithms import build_schedule
from scaleup.collectives.spec import CollectiveSpec
from scaleup.errors import PostconditionError
from scaleup.sim import SimResult, compile_schedule
from scaleup.sim import network as network_module
from scaleup.topology import resolve_topology
from scaleup.tune import BenchRequest, CheckedSet, TuneSession

SRC = Path(__file__).resolve().parents[2] / "src" / "scaleup"
DGX = resolve_topology("dgx-h100")
REQUEST = BenchRequest(sizes_bytes=(8, 1 << 16, 1 << 24, 1 << 30))


def test_no_module_level_caches_in_sim_and_tune():
    """No ``functools.lru_cache``/``cache`` on functions and no module-level dict of networks in
    the simulator or the tuner (pure helpers of immutable values are fine: none are left)."""
    found = []
    for path in [*(SRC / "sim").glob("*.py"), *(SRC / "tune").glob("*.py")]:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.FunctionDef):
                for deco in node.decorator_list:
                    text = ast.unparse(deco)
                    if "lru_cache" in text or text.endswith("cache"):
                        found.append(f"{path.name}:{node.lineno} {text}")
    assert not found
    assert not hasattr(network_module, "network_for")


def test_a_session_owns_one_network_per_topology():
    session = TuneSession()
    assert session.network(DGX) is session.network(DGX)
    assert session.network(DGX) is not session.network(DGX.with_peer_access(False))
    assert session.network(DGX) is not TuneSession().network(DGX)


def test_results_do_not_depend_on_what_the_session_did_before():
    fresh = bench_rows(DGX, REQUEST)
    shared = TuneSession()
    bench_rows("pcie-8", REQUEST, session=shared)
    bench_rows(DGX, BenchRequest(op="all_gather", sizes_bytes=(1 << 20,)), session=shared)
    assert bench_rows(DGX, REQUEST, session=shared) == fresh


def test_a_shared_network_gives_the_same_times_as_a_private_one():
    """Routes a session added for other schedules do not change a schedule's time."""
    session = TuneSession()
    session.tune(DGX, BenchRequest(sizes_bytes=(1 << 30,)))  # fills the session's network
    ring = build_schedule("ring", CollectiveSpec("all_reduce", 8, 1 << 22), channels=4)
    shared = compile_schedule(ring, DGX, network=session.network(DGX)).run("simple")
    private = compile_schedule(ring, DGX).run("simple")
    assert shared.time_s == private.time_s


def test_the_choice_is_typed_and_explained():
    choice = TuneSession().tune(DGX, BenchRequest(sizes_bytes=(1 << 30,), selection="fastest"))[0]
    assert isinstance(choice.result, SimResult)
    assert choice.verification == "exact"
    text = choice.explain()
    assert text.startswith(f"chose {choice.algorithm}/{choice.protocol}/{choice.channels}")
    assert f"* {choice.algorithm}/{choice.protocol}/{choice.channels}:" in text
    assert len(text.splitlines()) == 1 + len(choice.considered)


def test_a_choice_that_fails_the_exact_check_is_dropped(monkeypatch):
    """The chosen structure is replayed before it is reported; a wrong one is dropped and the
    next fastest chosen (here nvls, the 1 GiB winner, made to fail)."""
    request = BenchRequest(sizes_bytes=(1 << 30,))
    assert TuneSession().tune(DGX, request)[0].algorithm == "nvls"
    real = CheckedSet.check_exact

    def nvls_is_wrong(self, timed):
        if timed.algorithm == "nvls":
            raise PostconditionError("made wrong for the test")
        return real(self, timed)

    monkeypatch.setattr(CheckedSet, "check_exact", nvls_is_wrong)
    for choose in (TuneSession().tune, TuneSession().sweep):
        choice = choose(DGX, request)[0]
        assert choice.algorithm != "nvls"
        assert choice.verification == "exact"
