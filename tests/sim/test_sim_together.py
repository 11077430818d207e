"""Schedules merged into one and run together (scaleup.sim.together): the renumbering, a single
part timed exactly as CompiledSchedule.run times it, offsets, and a shared link split in two."""

from __future__ import annotations

import numpy as np
import pytest

from scaleup.collectives.algorithms import build_schedule
from scaleup.collectives.build import ScheduleBuilder
from scaleup.collectives.spec import CollectiveSpec
from scaleup.sim import compile_schedule
from scaleup.sim.together import JobPart, merge_schedules, run_together
from scaleup.topology import resolve_topology
from scaleup.topology.model import Device, Link, Topology

GIB = 1 << 30
#: NVLink4: 25 GB/s per link per direction (catalog) x 20.6/25 payload (sim.params.LINK_EFFICIENCY)
NVLINK4_PAYLOAD_BYTES_PER_S = 20.6e9


def two_pairs_one_link() -> Topology:
    """g0, g1 on sw0 and g2, g3 on sw1 (18 NVLink4 each); ONE NVLink4 link joins the switches,
    so g0->g2 and g1->g3 cross one 20.6 GB/s channel and nothing else is narrower."""
    devices = [Device.of(f"g{i}", "H100") for i in range(4)]
    devices += [Device.of("sw0", "nvswitch3"), Device.of("sw1", "nvswitch3")]
    links = [Link(f"g{i}", "sw0" if i < 2 else "sw1", "nvlink4", 18) for i in range(4)]
    return Topology("two-pairs-one-link", devices, [*links, Link("sw0", "sw1", "nvlink4", 1)])


def send(count: int):
    """One copy of ``count`` float32 from rank 0 to rank 1."""
    b = ScheduleBuilder(CollectiveSpec("send_recv", nranks=2, count=count), "p2p")
    b.copy(b.input(0, 0, count), b.output(1, 0, count))
    return b.build()


def test_merge_renumbers_ranks_ops_channels_and_counts_bytes():
    ring = build_schedule("ring", CollectiveSpec("all_reduce", 3, 96), channels=2)
    m = merge_schedules([JobPart(ring, (5, 1, 3), 4), JobPart(ring, (3, 7, 0), 2)])
    t, n = m.schedule.table, ring.n_ops
    assert m.ranks == (0, 1, 3, 5, 7)
    assert m.op_ptr.tolist() == [0, n, 2 * n]
    # job 0's rank r runs on accelerator (5, 1, 3)[r], merged rank = its index in m.ranks
    assert t.rank[:n].tolist() == [(3, 1, 2)[r] for r in ring.table.rank]
    assert t.rank[n:].tolist() == [(2, 4, 0)[r] for r in ring.table.rank]
    assert t.count[:n].tolist() == (ring.table.count * 4).tolist()
    assert t.count[n:].tolist() == (ring.table.count * 2).tolist()
    assert t.channel[n:].min() == ring.table.channel.max() + 1  # its own thread blocks
    assert t.dep_idx[len(ring.table.dep_idx) :].min() >= n  # no dependency across jobs
    assert np.array_equal(t.dep_idx[len(ring.table.dep_idx) :], ring.table.dep_idx + n)


@pytest.mark.parametrize(("algorithm", "step_bytes"), [("ring", None), ("tree", 524288.0)])
def test_one_part_is_timed_exactly_as_alone(algorithm, step_bytes):
    topo = resolve_topology("dgx-h100")
    spec = CollectiveSpec("all_reduce", 8, 1 << 20)
    s = build_schedule(algorithm, spec, channels=2, chunks=4 if algorithm == "tree" else 1)
    alone = compile_schedule(s, topo).run("simple", step_bytes=step_bytes, exact=True).time_s
    (together,) = run_together(topo, [JobPart(s, tuple(range(8)), 4)], step_bytes=step_bytes)
    assert together == alone


def test_shared_link_splits_in_two_hand_worked():
    """Alone, 1 GiB crosses the 20.6 GB/s link in B/C = 52123.389 us after a fixed latency L;
    together both copies share it at C/2 from the same instant: L + 2B/C, i.e. B/C more."""
    topo = two_pairs_one_link()
    a, b = JobPart(send(GIB // 4), (0, 2), 4), JobPart(send(GIB // 4), (1, 3), 4)
    bc_s = GIB / NVLINK4_PAYLOAD_BYTES_PER_S
    (alone,) = run_together(topo, [a])
    (alone_small,) = run_together(topo, [JobPart(send(GIB // 16), (0, 2), 4)])
    latency_s = alone - bc_s
    assert alone_small - bc_s / 4 == pytest.approx(latency_s, rel=1e-9)  # L: size-independent
    assert 0 < latency_s < 50e-6
    together = run_together(topo, [a, b])
    assert together == pytest.approx([latency_s + 2 * bc_s] * 2, rel=1e-12)
    assert together[0] / alone == pytest.approx(1.9996835, rel=1e-6)


def test_an_offset_past_the_other_jobs_end_costs_nothing():
    topo = two_pairs_one_link()
    a = JobPart(send(GIB // 4), (0, 2), 4)
    (alone,) = run_together(topo, [a])
    late = JobPart(send(GIB // 4), (1, 3), 4, offset_s=alone + 1e-6)
    assert run_together(topo, [a, late]) == pytest.approx([alone, alone], rel=1e-12)


def test_an_offset_inside_the_other_transfer_shares_the_overlap():
    """b starts when a has moved half its bytes alone. Both pay the fixed latency L before
    moving bytes, so b's bytes start at o + L, when a has moved C*o; then both move at C/2
    until a ends, a's remaining B - C*o taking 2(B - C*o)/C; b has moved as much, and its
    remaining C*o bytes run alone at C."""
    topo = two_pairs_one_link()
    c = NVLINK4_PAYLOAD_BYTES_PER_S
    a = JobPart(send(GIB // 4), (0, 2), 4)
    (alone,) = run_together(topo, [a])
    latency_s = alone - GIB / c
    offset_s = GIB / c / 2
    got_a, got_b = run_together(topo, [a, JobPart(send(GIB // 4), (1, 3), 4, offset_s)])
    shared_s = 2 * (GIB - c * offset_s) / c
    end_a = offset_s + latency_s + shared_s
    end_b = end_a + c * offset_s / c
    assert got_a == pytest.approx(end_a, rel=1e-12)  # = L + 1.5 B/C
    assert got_a == pytest.approx(latency_s + 1.5 * GIB / c, rel=1e-12)
    assert got_b == pytest.approx(end_b - offset_s, rel=1e-12)  # = L + 1.5 B/C from its start
