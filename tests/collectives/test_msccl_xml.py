"""MSCCL XML in and out: import verifies and times like scaleup's own schedules; errors name the
element; export then import round-trips."""

from __future__ import annotations

import pytest
from tests.collectives.msccl_cases import algo, allpairs_all_reduce, gpu, ring_all_reduce, step, tb

from scaleup.collectives import msccl_xml
from scaleup.collectives.algorithms import build_schedule
from scaleup.collectives.msccl_export import schedule_to_msccl_xml
from scaleup.collectives.msccl_import import schedule_from_msccl_xml
from scaleup.collectives.msccl_xml import parse_msccl_xml
from scaleup.collectives.spec import CollectiveSpec
from scaleup.collectives.verify import verify
from scaleup.errors import LimitError, MscclFileError, UsageError
from scaleup.sim.simulate import simulate
from scaleup.topology.presets import resolve_topology


@pytest.fixture(scope="module")
def dgx():
    return resolve_topology("dgx-h100")


@pytest.mark.parametrize("n", [2, 3, 4, 8])
def test_ring_xml_imports_and_verifies(n: int) -> None:
    schedule = schedule_from_msccl_xml(ring_all_reduce(n), source="ring.xml", count=4 * n)
    assert schedule.spec.collective == "all_reduce"
    assert schedule.nranks == n
    assert schedule.params["protocol"] == "simple"
    verify(schedule, "int32")
    verify(schedule, "float32", seed=3)


def test_rrs_partial_sums_live_in_added_scratch() -> None:
    schedule = schedule_from_msccl_xml(ring_all_reduce(4, middle="rrs"), count=8)
    assert schedule.scratch_count == 2 * 2  # two rrs steps of one 2-element chunk per gpu
    verify(schedule, "int32")


def test_ring_xml_times_like_scaleup_ring(dgx) -> None:
    n, count = 8, 8 * 2**20
    imported = schedule_from_msccl_xml(ring_all_reduce(n), source="ring.xml", count=count)
    native = build_schedule("ring", CollectiveSpec("all_reduce", nranks=n, count=count))
    assert imported.n_ops == native.n_ops
    t_imported = simulate(imported, dgx).time_s
    t_native = simulate(native, dgx).time_s
    assert t_imported == pytest.approx(t_native, rel=0.01)


def test_allpairs_in_place_xml_verifies_in_place() -> None:
    schedule = schedule_from_msccl_xml(allpairs_all_reduce(4), source="ap.xml", count=8)
    assert schedule.params["in_place"] is True
    verify(schedule, "int32", in_place=True)


def test_protocol_names_map_to_nccl_spelling() -> None:
    for proto, name in (("LL", "ll"), ("LL128", "ll128"), ("Simple", "simple")):
        schedule = schedule_from_msccl_xml(ring_all_reduce(2, proto=proto))
        assert schedule.params["protocol"] == name


def _two_gpu(steps0: list[str], steps1: list[str], **kw: int) -> str:
    return algo("t", 2, [
        gpu(0, [tb(0, 1, 1, steps0)], i=2, o=2), gpu(1, [tb(0, 0, 0, steps1)], i=2, o=2),
    ], **kw)  # fmt: skip


@pytest.mark.parametrize(
    ("text", "where", "words"),
    [
        ("<algo", "", "not well-formed XML"),
        ("<topology/>", "", "not <algo>"),
        (algo("t", 2, [gpu(0, [], i=2, o=2)]), "algo", "gpu 1 is missing"),
        (_two_gpu([step(0, "fancy", "i", 0, "o", 0)], []), "gpu 0 tb 0 step 0", "'fancy'"),
        (algo("t", 2, [gpu(0, [tb(0, 5, -1, [])], i=2, o=2), gpu(1, [], i=2, o=2)]),
         "gpu 0 tb 0", "send=5 is not another gpu"),
        (_two_gpu([step(0, "s", "i", 0, "o", 0)], []), "gpu 0", "receives 0 times"),
        (_two_gpu([step(0, "s", "i", 7, "o", 0)], [step(0, "r", "i", 0, "o", 0)]),
         "gpu 0 tb 0 step 0", "past the 2 chunks"),
        (_two_gpu([step(0, "s", "i", 0, "o", 0, depid=3, deps=0)], []),
         "gpu 0 tb 0 step 0", "depid=3"),
        (_two_gpu([step(0, "r", "i", 0, "o", 0), step(1, "s", "i", 0, "o", 0)],
                  [step(0, "r", "i", 0, "o", 0), step(1, "s", "i", 0, "o", 0)]),
         "gpu 0 tb 0 step 0", "cycle"),
        (_two_gpu([step(0, "s", "i", 0, "o", 0, cnt=2)], [step(0, "r", "i", 0, "o", 0)]),
         "gpu 1 tb 0 step 0", "cnt=2"),
        ('<!DOCTYPE a [<!ENTITY x "y">]><algo/>', "", "DTD"),
    ],
)  # fmt: skip
def test_bad_xml_is_one_line_naming_the_element(text: str, where: str, words: str) -> None:
    with pytest.raises(MscclFileError) as caught:
        schedule_from_msccl_xml(text, source="bad.xml")
    message = str(caught.value)
    assert "\n" not in message
    assert message.startswith(f"bad.xml: {where}")
    assert words in message


def test_count_must_divide_into_chunks() -> None:
    with pytest.raises(UsageError, match="multiple of nchunksperloop=4"):
        schedule_from_msccl_xml(ring_all_reduce(4), count=6)


def test_step_count_is_limited(monkeypatch: pytest.MonkeyPatch) -> None:
    text = algo("t", 1, [gpu(0, [tb(0, -1, -1, [step(i, "nop") for i in range(3)])], i=1, o=1)])
    parse_msccl_xml(text)
    monkeypatch.setattr(msccl_xml, "MAX_SCHEDULE_OPS", 2)
    with pytest.raises(LimitError, match="3 steps"):
        parse_msccl_xml(text)


@pytest.mark.parametrize(
    ("algorithm", "collective", "n", "params"),
    [
        ("ring", "all_reduce", 4, {}),
        ("ring", "all_reduce", 5, {"channels": 2, "bidirectional": True}),
        ("ring", "all_gather", 4, {}),
        ("ring", "reduce_scatter", 3, {}),
        ("allpairs", "all_reduce", 4, {}),
        ("tree", "all_reduce", 6, {}),
        ("direct", "all_to_all", 4, {}),
    ],
)
def test_export_then_import_verifies_and_times_the_same(
    dgx, algorithm: str, collective: str, n: int, params: dict
) -> None:
    count = 240 * 2**12
    original = build_schedule(algorithm, CollectiveSpec(collective, nranks=n, count=count),
                              **params)  # fmt: skip
    text = schedule_to_msccl_xml(original)
    back = schedule_from_msccl_xml(text, source="out.xml", count=count)
    assert back.spec.collective == collective
    verify(back, "int32")
    assert simulate(back, dgx).time_s == pytest.approx(simulate(original, dgx).time_s, rel=0.01)


def test_export_of_nvls_is_refused() -> None:
    schedule = build_schedule("nvls", CollectiveSpec("all_reduce", nranks=4, count=64))
    with pytest.raises(UsageError, match="switch_reduce"):
        schedule_to_msccl_xml(schedule)
