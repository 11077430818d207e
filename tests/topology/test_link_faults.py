"""Failed and degraded links (scaleup.topology.faults): the transform, its errors, files, and
hand-worked answers for the simulator's routes and the tuner's channel search on damaged fabrics."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scaleup import hardware
from scaleup.collectives.algorithms import build_schedule
from scaleup.collectives.spec import CollectiveSpec
from scaleup.errors import TopologyFileError, UsageError
from scaleup.sim import simulate
from scaleup.sim.paths import link_efficiency
from scaleup.topology import Device, Link, Topology, dumps, loads, resolve_topology
from scaleup.topology.faults import LinkFault, apply_faults, parse_degrade, parse_faults
from scaleup.topology.torus import TorusTopology
from scaleup.tune.channel_search import link_loads, search_rings

N = 8


def _ring8() -> Topology:
    """Eight H100 in a ring, two NVLink4 links between neighbours (no switch)."""
    devices = [Device.of(f"g{i}", "H100") for i in range(N)]
    links = [Link(f"g{i}", f"g{(i + 1) % N}", "nvlink4", 2) for i in range(N)]
    return Topology("ring8", devices, links)


def _ring_all_reduce_s(topo: Topology, count: int, **params: object) -> float:
    spec = CollectiveSpec("all_reduce", nranks=N, count=count)
    return simulate(build_schedule("ring", spec, **params), topo).time_s


def _slope_s(topo: Topology, **params: object) -> float:
    """Time added by 2^26 more float32 elements (256 MiB): the bandwidth term, latency cancelled."""
    return _ring_all_reduce_s(topo, 2**27, **params) - _ring_all_reduce_s(topo, 2**26, **params)


#: Bytes every ring all_reduce lane moves per byte of the buffer: 2(n-1)/n.
RING_FACTOR = 2 * (N - 1) / N
EXTRA_BYTES = 4 * 2**26


# -- the transform ----------------------------------------------------------------------------
def test_fail_removes_every_link_of_the_pair_and_names_the_fabric():
    t = resolve_topology("dgx1-v100")
    d = apply_faults(t, parse_faults(["g1-g0"], ["g0-g2=0.5"]))
    assert d.name == "dgx1-v100+fail(g1-g0)+degrade(g0-g2=0.5)"
    pairs = {frozenset((x.a, x.b)) for x in d.links}
    assert frozenset(("g0", "g1")) not in pairs
    assert ("g0", "g1") not in d.channel_index
    assert ("g1", "g0") not in d.channel_index
    assert len(d.links) == len(t.links) - 1
    # degraded: each physical link at half the catalog rate, both directions
    g0g2 = d.channels[d.channel_index[("g0", "g2")]]
    g2g0 = d.channels[d.channel_index[("g2", "g0")]]
    per_link = hardware.link_tech("nvlink2").bandwidth_bytes_per_s
    assert g0g2.bandwidth_bytes_per_s == pytest.approx(0.5 * per_link)
    assert g2g0.bandwidth_bytes_per_s == pytest.approx(0.5 * per_link)
    assert t.name == "dgx1-v100"  # the original is untouched


def test_degrade_scales_an_existing_override_and_keeps_the_count():
    devices = [Device.of("g0", "H100"), Device.of("g1", "H100")]
    t = Topology("pair", devices, [Link("g0", "g1", "nvlink4", 4, 10.0)])
    d = apply_faults(t, parse_faults(None, ["g0-g1=0.25"]))
    assert d.links == (Link("g0", "g1", "nvlink4", 4, 2.5),)
    assert d.channels[0].bandwidth_bytes_per_s == pytest.approx(4 * 2.5e9)


def test_degrade_one_and_no_faults_change_nothing():
    t = resolve_topology("dgx-h100")
    assert apply_faults(t, ()) is t
    d = apply_faults(t, parse_faults(None, ["g0-sw0=1"]))
    assert d.links == t.links
    assert d.channels == t.channels


def test_a_damaged_fabric_saved_reads_back_equal():
    t = apply_faults(resolve_topology("dgx1-v100"), parse_faults(["g0-g1"], ["g2-g3=0.3"]))
    assert loads(dumps(t)) == t


def test_a_torus_that_loses_a_link_is_routed_by_shortest_paths():
    t = resolve_topology("trn2-16")
    assert isinstance(t, TorusTopology)
    a, b = t.links[0].a, t.links[0].b
    degraded = apply_faults(t, parse_faults(None, [f"{a}-{b}=0.5"]))
    assert isinstance(degraded, TorusTopology)  # every grid link is still there
    failed = apply_faults(t, parse_faults([f"{a}-{b}"]))
    assert not isinstance(failed, TorusTopology)
    assert failed.calibration == t.calibration
    ranks = [t.rank(a), t.rank(b)]
    assert simulate(_send(), failed, ranks=ranks).time_s > simulate(_send(), t, ranks=ranks).time_s


def _send(count: int = 2**24):
    """A send_recv of ``count`` float32 from rank 0 to rank 1."""
    from scaleup.collectives.build import ScheduleBuilder

    b = ScheduleBuilder(CollectiveSpec("send_recv", nranks=2, count=count), "p2p")
    b.copy(b.input(0, 0, count), b.output(1, 0, count))
    return b.build()


def test_a_device_id_with_a_dash_is_split_where_both_halves_exist():
    devices = [Device.of("gpu-a", "H100"), Device.of("gpu-b", "H100"), Device.of("c", "H100")]
    links = [Link("gpu-a", "gpu-b", "nvlink4", 2), Link("gpu-b", "c", "nvlink4", 2)]
    t = Topology("dashes", devices, [*links, Link("c", "gpu-a", "nvlink4", 2)])
    d = apply_faults(t, parse_faults(["gpu-a-gpu-b"]))
    assert frozenset(("gpu-a", "gpu-b")) not in {frozenset((x.a, x.b)) for x in d.links}


# -- bad input --------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("fails", "degrades", "source", "words"),
    [
        (["g0-g9"], [], "--fail-link", "no device 'g9'"),
        (["g0-g7"], [], "--fail-link", "no link between g0 and g7"),
        (["g0"], [], "--fail-link", "two device ids joined by '-'"),
        (["g0-"], [], "--fail-link", "two device ids joined by '-'"),
        (["g0-g0"], [], "--fail-link", "one device twice"),
        (["g0-g1", "g1-g0"], [], "--fail-link", "named twice"),
        (["g0-g1"], ["g1-g0=0.5"], "--degrade", "named twice"),
        ([], ["g0-g1"], "--degrade", "A-B=F"),
        ([], ["g0-g1=x"], "--degrade", "not a number"),
        ([], ["g0-g1=0"], "--degrade", "(0, 1]"),
        ([], ["g0-g1=1.5"], "--degrade", "(0, 1]"),
        ([], ["g0-g1=-0.5"], "--degrade", "(0, 1]"),
        ([], ["g0-g1=nan"], "--degrade", "(0, 1]"),
        (
            ["g0-g1", "g0-g2", "g0-g3", "g0-g4"],
            [],
            "--fail-link",
            "off from the other accelerators",
        ),
    ],
)
def test_bad_faults_raise_usage_errors_naming_the_flag(fails, degrades, source, words):
    t = resolve_topology("dgx1-v100")
    with pytest.raises(UsageError) as info:
        apply_faults(t, parse_faults(fails, degrades))
    assert info.value.source == source
    assert words in info.value.message
    assert "\n" not in str(info.value)


def test_parse_degrade_keeps_the_factor():
    assert parse_degrade(" n0.g0-n0.sw0 = 0.5 ") == LinkFault(
        "n0.g0-n0.sw0", 0.5, "--degrade", " n0.g0-n0.sw0 = 0.5 "
    )


# -- topology files ---------------------------------------------------------------------------
_FILE = """\
name = "tri"
[[devices]]
id = "g0"
type = "H100"
[[devices]]
id = "g1"
type = "H100"
[[devices]]
id = "g2"
type = "H100"
[[links]]
a = "g0"
b = "g1"
tech = "nvlink4"
count = 4
[[links]]
a = "g1"
b = "g2"
tech = "nvlink4"
count = 4
[[links]]
a = "g0"
b = "g2"
tech = "nvlink4"
count = 4
"""


def test_file_faults_are_applied_on_reading():
    text = _FILE + '[[faults]]\na = "g0"\nb = "g1"\nfailed = true\n'
    text += '[[faults]]\na = "g2"\nb = "g1"\ndegrade = 0.25\n'
    t = loads(text, source="tri.toml")
    assert t.name == "tri+fail(g0-g1)+degrade(g2-g1=0.25)"
    assert t.links == (Link("g1", "g2", "nvlink4", 4, 6.25), Link("g0", "g2", "nvlink4", 4))


@pytest.mark.parametrize(
    ("fault", "entry", "words"),
    [
        ('a = "g0"\nb = "g1"\ndegrade = 1.5', "faults[0]", "less than or equal to 1"),
        ('a = "g0"\nb = "g1"\ndegrade = 0', "faults[0]", "greater than 0"),
        ('a = "g0"\nb = "g1"\ndegrade = 0.5\nfailed = true', "faults[0]", "give one of"),
        ('a = "g0"\nb = "g1"', "faults[0]", "give one of"),
        ('a = "g0"\nb = "g9"\nfailed = true', "faults[0]", "no device 'g9'"),
        ('a = "g0"\nb = "g1"\nbroken = true', "faults[0]", "unknown key 'broken'"),
    ],
)
def test_bad_file_faults_name_the_entry(fault, entry, words):
    with pytest.raises(TopologyFileError) as info:
        loads(_FILE + "[[faults]]\n" + fault + "\n", source="tri.toml")
    assert info.value.source == "tri.toml"
    assert info.value.entry == entry
    assert words in info.value.message


def test_file_faults_that_cut_an_accelerator_off_are_refused():
    text = _FILE + "".join(
        f'[[faults]]\na = "g2"\nb = "{b}"\nfailed = true\n' for b in ("g0", "g1")
    )
    with pytest.raises(TopologyFileError, match="off from the other accelerators") as info:
        loads(text, source="tri.toml")
    assert info.value.entry == "faults[1]"


# -- hand-worked: routes ----------------------------------------------------------------------
def test_bidirectional_ring_with_a_failed_link_halves_its_bandwidth():
    """Ring of 8 (two NVLink4 links per hop, B = 2 x 25 GB/s x 0.824 = 41.2 GB/s per direction),
    ring all_reduce in both directions (half the data each way, every channel one flow).

    Fail g0-g1: the forward flow g0->g1 detours g0->g7->...->g2->g1 over the reverse channels and
    the reverse flow g1->g0 over the forward ones, so every surviving channel carries two flows:
    each at B/2. By hand, per extra 256 MiB: intact 2(n-1)/n x (S/2) / B = 5.70 ms; failed
    2(n-1)/n x (S/2) / (B/2) = 11.40 ms: exactly twice (simulated 5.73 and 11.43 ms)."""
    ring = _ring8()
    failed = apply_faults(ring, parse_faults(["g0-g1"]))
    b_bytes_per_s = 2 * 25e9 * link_efficiency("nvlink4")
    hand_intact_s = RING_FACTOR * (EXTRA_BYTES / 2) / b_bytes_per_s
    hand_failed_s = RING_FACTOR * (EXTRA_BYTES / 2) / (b_bytes_per_s / 2)
    intact_s = _slope_s(ring, bidirectional=True)
    failed_s = _slope_s(failed, bidirectional=True)
    assert intact_s == pytest.approx(hand_intact_s, rel=0.01)
    assert failed_s == pytest.approx(hand_failed_s, rel=0.01)
    # twice, up to the receivers' local HBM copies, which grow with S but not with the detour
    assert failed_s / intact_s == pytest.approx(2.0, rel=5e-3)


def test_one_way_ring_detours_over_idle_channels_at_no_bandwidth_cost():
    """The one-way ring uses only the forward channels; g0->g1's detour runs over the idle
    reverse ones, so the bandwidth term is unchanged and only the detour's latency is added."""
    ring = _ring8()
    failed = apply_faults(ring, parse_faults(["g0-g1"]))
    assert _slope_s(failed) == pytest.approx(_slope_s(ring), rel=1e-9)
    assert _ring_all_reduce_s(failed, 2**26) > _ring_all_reduce_s(ring, 2**26)


def test_degrading_one_switch_link_of_every_gpu_slows_a_ring_by_the_lost_share():
    """dgx-h100: each GPU has 5+4+4+5 = 18 NVLink4 links to its 4 NVSwitches. Degrade every
    GPU's sw0 links to 0.5: 2.5+4+4+5 = 15.5 link-equivalents, routes split in proportion, so a
    bandwidth-bound ring all_reduce (16 channels) takes 18/15.5 = 1.161x as long."""
    h = resolve_topology("dgx-h100")
    degraded = apply_faults(h, parse_faults(None, [f"g{i}-sw0=0.5" for i in range(N)]))
    ratio = _slope_s(degraded, channels=16) / _slope_s(h, channels=16)
    # up to the receivers' local HBM copies, which grow with S but not with the links
    assert ratio == pytest.approx(18 / 15.5, rel=5e-3)


def test_halving_one_gpus_links_at_least_doubles_its_ring_time():
    """dgx-h100, all four of g0's switch links at 0.5: every ring passes g0, whose 18 links now
    carry 9 link-equivalents each way, so the bandwidth term is at least twice the intact one
    (the other hops run ahead and wait: the simulator's max-min sharing gives 2.5x)."""
    h = resolve_topology("dgx-h100")
    half = apply_faults(h, parse_faults(None, [f"g0-sw{k}=0.5" for k in range(4)]))
    assert _slope_s(half, channels=16) >= 2.0 * _slope_s(h, channels=16) * (1 - 1e-9)


# -- hand-worked: the tuner's channel search --------------------------------------------------
@pytest.mark.parametrize(
    ("fails", "degrades", "rings"),
    [
        ([], [], 6),  # 6 NVLink2 links per GPU, 25 GB/s each: 6 rings of 25 GB/s
        (["g0-g1"], [], 4),  # g0 keeps g2, g3 and the two g4 links
        ([], ["g0-g1=0.5"], 5),  # g0-g1's two links now carry 25 GB/s together: one ring
        ([], ["g0-g1=0.25"], 4),  # 12.5 GB/s: too slow for a 25 GB/s ring
    ],
)
def test_ring_search_follows_the_damaged_fabric(fails, degrades, rings):
    t = apply_faults(resolve_topology("dgx1-v100"), parse_faults(fails, degrades))
    plan = search_rings(t)
    assert plan.n_channels == rings
    assert plan.bandwidth_bytes_per_s == pytest.approx(25e9)
    loads_ = link_loads(plan, t)
    for (src, dst), load in loads_.items():  # no channel over its (damaged) capacity
        assert load <= t.channels[t.channel_index[(src, dst)]].bandwidth_bytes_per_s * (1 + 1e-9)
    if fails:
        assert ("g0", "g1") not in loads_
        assert ("g1", "g0") not in loads_


# -- properties -------------------------------------------------------------------------------
_V100_PAIRS = [(x.a, x.b) for x in resolve_topology("dgx1-v100").links]


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    pairs=st.lists(st.sampled_from(_V100_PAIRS), min_size=1, max_size=4, unique=True),
    factor=st.floats(0.05, 1.0),
)
def test_degrading_never_makes_a_ring_faster(pairs, factor):
    t = resolve_topology("dgx1-v100")
    d = apply_faults(t, parse_faults(None, [f"{a}-{b}={factor!r}" for a, b in pairs]))
    orders = [[0, 1, 3, 2, 6, 7, 5, 4]]
    assert _ring_all_reduce_s(d, 2**22, orders=orders) >= _ring_all_reduce_s(
        t, 2**22, orders=orders
    ) * (1 - 1e-12)


@settings(max_examples=15, deadline=None)
@given(pairs=st.lists(st.sampled_from(_V100_PAIRS), min_size=1, max_size=6, unique=True))
def test_degrade_one_times_the_same_as_no_fault(pairs):
    t = resolve_topology("dgx1-v100")
    d = apply_faults(t, parse_faults(None, [f"{a}-{b}=1.0" for a, b in pairs]))
    assert d.links == t.links
    assert _ring_all_reduce_s(d, 2**20) == _ring_all_reduce_s(t, 2**20)


# -- symmetry fast paths ----------------------------------------------------------------------
_DAMAGED_H100 = [
    ([], ["g0-sw0=0.5"]),
    (["g3-sw1"], []),
]


@pytest.mark.parametrize(("fails", "degrades"), _DAMAGED_H100)
@pytest.mark.parametrize(
    ("algorithm", "params"), [("ring", {"channels": 8}), ("direct", {}), ("nvls", {})]
)
def test_flow_classes_are_dropped_on_a_damaged_fabric(fails, degrades, algorithm, params):
    """dgx-h100's ring runs as flow classes (every rank shift maps the fabric onto itself); one
    damaged GPU breaks that (channels that copy one another stay classes: ranks fixed, they
    cross the same links), and the default run must then equal the exact one."""
    from scaleup.errors import SimulationError
    from scaleup.sim.protocols import protocol
    from scaleup.sim.simulate import compile_schedule

    h = resolve_topology("dgx-h100")
    t = apply_faults(h, parse_faults(fails, degrades))
    spec = CollectiveSpec("all_reduce", nranks=N, count=2**22)
    schedule = build_schedule(algorithm, spec, **params)
    if algorithm == "ring":
        assert compile_schedule(schedule, h).quotient(protocol("simple")) is not None
    if algorithm == "nvls" and fails:  # nvls needs every GPU linked to every switch
        with pytest.raises(SimulationError, match="directly linked"):
            compile_schedule(schedule, t)
        return
    compiled = compile_schedule(schedule, t)
    if compiled.quotient(protocol("simple")) is not None:
        sym = compiled.symmetry()
        assert sym is not None
        assert all((g.sigma == np.arange(N)).all() for g in sym.generators)  # no rank moves
    assert compiled.run().time_s == pytest.approx(compiled.run(exact=True).time_s, rel=1e-12)


@pytest.mark.parametrize(
    ("preset", "fails", "degrades"),
    [
        ("mi300x-8", [], ["g0-g1=0.3"]),
        pytest.param("dgx1-v100", ["g0-g1"], ["g2-g3=0.5"], marks=pytest.mark.slow),  # 13 s
    ],
)
def test_tuned_rows_agree_with_exact_on_a_damaged_fabric(preset, fails, degrades):
    """The tuner's fast paths (ring patterns, flow classes) against ``--exact``."""
    from scaleup.bench import bench_rows
    from scaleup.tune import BenchRequest, TuneSession

    t = apply_faults(resolve_topology(preset), parse_faults(fails, degrades))
    request = BenchRequest(op="all_reduce", sizes_bytes=(2**16, 2**22))
    fast = bench_rows(t, request, session=TuneSession())
    exact = bench_rows(t, request, session=TuneSession(exact=True))
    for f, e in zip(fast, exact, strict=True):
        assert (f.algo, f.proto, f.channels) == (e.algo, e.proto, e.channels)
        assert f.time_us == pytest.approx(e.time_us, rel=1e-9)
