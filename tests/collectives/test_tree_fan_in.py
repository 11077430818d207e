"""A tree parent takes all its children's partial sums at once (NCCL's ``FanAsymmetric<3, 1>``).

The first child reduces into the parent's accumulator; every later child lands in a scratch
slot of its own at the same time, and one local pass folds the slots in (no step latency).
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tests.sim.helpers_sim import alpha_beta, uniform_switch

from scaleup.collectives.algorithms import build_schedule
from scaleup.collectives.algorithms.tree import dtree_parents
from scaleup.collectives.schedule import Buffer, OpKind
from scaleup.collectives.spec import CollectiveSpec
from scaleup.collectives.verify import verify
from scaleup.sim import compile_schedule


@st.composite
def trees(draw: st.DrawFn) -> list[int]:
    """A random tree over 2..9 ranks (each rank's parent among the ranks before it, then the
    labels shuffled): any fan-out, any depth."""
    n = draw(st.integers(2, 9))
    parents = [-1] + [draw(st.integers(0, r - 1)) for r in range(1, n)]
    perm = draw(st.permutations(range(n)))
    out = [-1] * n
    for r, p in enumerate(parents):
        out[perm[r]] = -1 if p < 0 else perm[p]
    return out


@settings(max_examples=40, deadline=None)
@given(
    tree=trees(),
    collective=st.sampled_from(["all_reduce", "reduce"]),
    chunks=st.integers(1, 3),
    extra=st.integers(0, 5),
    dtype=st.sampled_from(["int32", "float32"]),
    data=st.data(),
)
def test_any_fan_out_verifies(
    tree: list[int], collective: str, chunks: int, extra: int, dtype: str, data: st.DataObject
) -> None:
    """Every tree shape, root, odd count and chunking gives the collective's result with no
    race: the children that land together write disjoint scratch slots."""
    n = len(tree)
    root = data.draw(st.integers(0, n - 1)) if collective == "reduce" else 0
    spec = CollectiveSpec(collective, n, 2 * n + extra, root=root)
    schedule = build_schedule("tree", spec, chunks=chunks, parents=[[tree, tree]])
    verify(schedule, dtype)


def test_scratch_slots_follow_the_widest_fan_in() -> None:
    """A root with three children: two of them land in scratch (slots 0 and 1 of an
    all_reduce; 1 and 2 of a reduce, whose slot 0 holds the inner accumulators)."""
    star = [-1, 0, 0, 0]
    count = 8
    for collective, slots in (("all_reduce", 2), ("reduce", 3)):
        spec = CollectiveSpec(collective, 4, count, root=0)
        schedule = build_schedule("tree", spec, parents=[[star, star]])
        assert schedule.scratch_count == slots * count, collective
        t = schedule.table
        landed = [
            i
            for i in range(t.n_ops)
            if t.kind[i] == OpKind.COPY and t.dst_buffer[t.dst_ptr[i]] == int(Buffer.SCRATCH)
        ]
        assert len(landed) == 2 * 2  # two later children on each of the two trees
        verify(schedule)


def test_children_ready_together_cost_one_step() -> None:
    """By hand, 8 B all_reduce (LL) over a star of 4 ranks on one switch: launch, then one step
    up (the three leaves reduce into the root at once) and one step down (the root copies to
    the three at once): launch + 2 alpha. Taken one after another the children would cost
    launch + 4 alpha."""
    topo = uniform_switch(4)
    star = [-1, 0, 0, 0]
    spec = CollectiveSpec("all_reduce", 4, 2)
    schedule = build_schedule("tree", spec, parents=[[star, star]])
    ab = alpha_beta(topo, protocol="ll")
    time_s = compile_schedule(schedule, topo).run("ll").time_s
    assert time_s == pytest.approx(ab.launch_s + 2 * ab.alpha_s, rel=0.02)


@pytest.mark.parametrize("servers", [3, 4, 5, 8])
def test_nvls_tree_heads_take_both_children_at_once(servers: int) -> None:
    """NVLS-Tree across servers: a head with two child servers folds one of them in locally
    (the other reduces straight into its sum), once per slice; the result verifies."""
    g = 2
    spec = CollectiveSpec("all_reduce", servers * g, 4 * servers * g + 3)
    schedule = build_schedule("nvls_tree", spec, ranks_per_node=g, channels=2, chunks=2)
    t = schedule.table
    src = t.src_rank[t.src_ptr[:-1]]
    dst = t.dst_rank[t.dst_ptr[:-1]]
    folds = (t.kind == int(OpKind.REDUCE)) & (src == dst)
    tree0, _ = dtree_parents(servers)
    two = sum(tree0.count(v) == 2 for v in range(servers))
    assert int(folds.sum()) == two * 2 * 2 * g  # channels x chunks x heads
    assert schedule.scratch_count == (spec.count if two else 0)
    verify(schedule)
