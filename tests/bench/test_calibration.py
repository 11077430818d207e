"""Calibration against measured nccl-tests/rccl-tests rows: the acceptance bounds of issue 4."""

from __future__ import annotations

from pathlib import Path

import pytest

from calibration import (  # bench/calibration.py: tooling, outside the library
    FITTED_PARAMETERS,
    MULTI_NODE,
    SYSTEMS,
    algo_constraint,
    compare,
    fit,
    load_measured,
    model_for,
    package_reads_measured,
    per_system,
    row_env,
    summarize,
    to_markdown,
)
from scaleup.errors import InputError

MEASURED = Path(__file__).resolve().parents[2] / "docs" / "calibration" / "measured.csv"


#: Systems cheap to simulate (8 ranks), for the fast tests; the bounds test uses every row.
_FAST = (
    "Azure ND H200 v5 (1 VM)",
    "HGX H100 single node",
    "DGX A100 multi-node (maintainer statement)",
)


@pytest.fixture(scope="module")
def all_comparisons():
    """Every row (issue 12 states its medians over all rows; the pruned search the validation
    script now uses makes them cheap enough to test)."""
    return compare(load_measured(MEASURED))


@pytest.fixture(scope="module")
def comparisons(all_comparisons):
    """Issue 4's bounds are about the single-node set; the multi-node rows added for issue 12 miss
    for reasons docs/validation.md gives row by row (flat tree across nodes, NVLS on 72 GPUs).
    Taken from every row's comparison (a row's simulation does not depend on the others)."""
    return [c for c in all_comparisons if c.row.system not in MULTI_NODE]


@pytest.fixture(scope="module")
def fast_comparisons():
    return compare([r for r in load_measured(MEASURED) if r.system in _FAST])


def test_every_measured_system_is_in_the_mapping_table():
    rows = load_measured(MEASURED)
    assert rows
    for row in rows:
        assert model_for(row.system) is not None, row.system
    for model in SYSTEMS:
        assert model.topology or model.exclude, model.system


@pytest.mark.slow
def test_summary_bounds_big_messages_guard(all_comparisons):
    """>= 64 MiB: a regression guard at today's median |busbw error| over all rows: 11.6% over
    126 rows since tree LL128 runs on NCCL's chunk across nodes (11.9% before, 13.3% before
    NCCL's LL128 caps were shared per graph channel; the p5 all_to_all rows, +7.5..+132%, are
    not explained: docs/validation.md)."""
    summary = summarize(all_comparisons)
    assert summary.n_big >= 10
    assert summary.median_busbw_error_big <= 0.12


@pytest.mark.slow
def test_summary_bounds_big_messages_without_the_p5_all_to_all(all_comparisons):
    """>= 64 MiB: median |busbw error| <= 10% (issue 4's bound; 5.3% today) over every row but
    the p5 all_to_all rows on 2-32 nodes, which alone break it (see the strict xfail below)."""
    kept = [c for c in all_comparisons if not _p5_all_to_all(c)]
    summary = summarize(kept)
    assert summary.n_big >= 10
    assert summary.median_busbw_error_big <= 0.10


def _p5_all_to_all(c) -> bool:
    return c.row.collective == "all_to_all" and "SageMaker HyperPod" in c.row.system


@pytest.mark.slow
@pytest.mark.xfail(
    reason="issue 4's 10% bound over all rows: missed since the p5 all_to_all rows on 2-32 nodes "
    "(simulated +7.5..+132%: EFA all_to_all ramps more slowly than the simulated p2p rounds and "
    "stops at 83-93% of the NIC bound; not explained, docs/validation.md); strict, so it fails "
    "loudly once the model meets it",
    strict=True,
)
def test_summary_bounds_big_messages(all_comparisons):
    summary = summarize(all_comparisons)
    assert summary.median_busbw_error_big <= 0.10


@pytest.mark.slow
def test_summary_bounds_small_messages(all_comparisons):
    """<= 64 KiB: median |time error| <= 30% over all rows, a regression guard at today's 25.8%.

    Issue 4's bound was 25%, met at 15.1% until the MI250X rows ran RCCL's defined trees
    (rome_model_56, scaleup.tune.rccl_trees): RCCL's structure, charged RCCL's per-step xGMI
    latency, puts the 1 KiB row at +38% (RCCL's own model: +82%); no latency is refitted to the
    row, so the median moved to the next row up (RTX 4090 8 B, +25.8%). docs/validation.md shows
    the miss against 25%. The MI300X rows at 1 and 64 KiB run RCCL's MSCCL all-pairs algorithm
    (scaleup.tune.msccl): about +30% where RCCL's ring took +105%.
    """
    summary = summarize(all_comparisons)
    assert summary.n_small >= 8
    assert summary.median_time_error_small <= 0.30


@pytest.mark.slow
def test_no_system_is_off_by_more_than_30_percent(comparisons):
    """A regression guard at today's worst system (A100 at 128 MiB, +27%).

    See the strict xfail below.
    """
    summary = summarize(comparisons)
    assert summary.worst_error_big <= 0.30, summary.per_system_big


@pytest.mark.slow
@pytest.mark.xfail(
    reason="issue 4's target; not met: the mid-size ramp (A100 ring +27% and B200 NVLS +26% at "
    "128 MiB, within ~2-13% at >= 1 GiB) is not explained by the model (docs/validation.md, "
    "'Model notes'); strict, so it fails loudly once the model meets it",
    strict=True,
)
def test_no_system_is_off_by_more_than_25_percent(comparisons):
    summary = summarize(comparisons)
    assert summary.worst_error_big <= 0.25, summary.per_system_big


def test_exclusions_carry_reasons(fast_comparisons):
    comparisons = fast_comparisons
    assert any(c.included for c in comparisons)
    assert any(not c.included for c in comparisons)
    for c in comparisons:
        if c.row.bytes is None:
            assert not c.included
        if not c.included:
            assert c.excluded
    text = to_markdown(comparisons, summarize(comparisons))
    assert "## Excluded rows and why" in text
    assert "median abs busbw error" in text


def test_at_least_ten_multi_node_systems_with_sources():
    rows = load_measured(MEASURED)
    systems = {r.system for r in rows}
    assert len(systems & MULTI_NODE) >= 10
    assert systems >= MULTI_NODE  # every name in the list has rows
    for r in rows:
        assert r.source.strip(), r.line
        assert r.nccl_version.strip() or r.system not in MULTI_NODE, (
            r.line
        )  # version or "not stated"


def test_leave_one_system_out_equals_in_sample(fast_comparisons):
    """Nothing is fitted to rows, so leaving a system out changes nothing it is judged by."""
    assert FITTED_PARAMETERS == ()
    assert fit(load_measured(MEASURED)) == {}
    for e in per_system(fast_comparisons):
        assert e.max_busbw_big_loso == e.max_busbw_big
        assert e.median_time_small_loso == e.median_time_small
    text = to_markdown(fast_comparisons, summarize(fast_comparisons), reads_measured=[])
    assert "leave-one-system-out" in text


def test_library_never_reads_the_calibration_data():
    src = Path(__file__).resolve().parents[2] / "src" / "scaleup"
    assert package_reads_measured(src) == []


def test_multi_node_rows_pin_the_algorithm_the_source_names():
    assert algo_constraint("RING (NCCL's default with NCCL_NVLS_ENABLE=0)") == "ring"
    assert algo_constraint("TREE (NCCL_ALGO=Tree; NCCL_NVLS_ENABLE=0)") == "tree"
    assert algo_constraint("RING (the thread's Ring run)") == "ring"
    assert algo_constraint("NVLSTREE (NCCL_ALGO=NVLSTree)") == "nvls_tree"
    assert algo_constraint("NVLS_TREE") == "nvls_tree"


def test_algo_column():
    assert algo_constraint("NVLS enabled (NCCL_NVLS_ENABLE=1; MNNVL)") is None
    assert algo_constraint("NVLS (stated) in-place") == "nvls"
    assert algo_constraint("TREE (NCCL_ALGO=TREE)") == "tree"
    assert algo_constraint("default") is None
    assert algo_constraint("NCCL_NVLS_ENABLE=0 (4G-8G sweep)") is None


def test_bad_file(tmp_path):
    bad = tmp_path / "m.csv"
    bad.write_text("system,bytes\nx,1\n")
    with pytest.raises(InputError, match="missing columns"):
        load_measured(bad)
    with pytest.raises(InputError):
        load_measured(tmp_path / "missing.csv")


def test_at_least_ten_multi_node_systems_are_in_bounds():
    """Issue 12: ten multi-node systems whose rows the validation simulates and judges (a
    preset that is simulated, no exclusion, and a row with a message size)."""
    sized = {r.system for r in load_measured(MEASURED) if r.bytes is not None}
    in_bounds = {
        m.system
        for m in SYSTEMS
        if m.system in MULTI_NODE and m.topology and m.simulate and not m.exclude
    }
    assert len(in_bounds & sized) >= 10, sorted(in_bounds & sized)


def test_efa_rows_run_with_their_plugin_eras_sizes():
    """A row's run had the sizes its flags name, else NCCL's own where its aws-ofi-nccl predates
    the release that sets them (NVLS chunk: v1.9.0-aws; buffer and p2p chunk: v1.16.0); off EFA
    nothing is added. Known answers: the older p5 pair (plugin 1.8.1, NCCL 2.20.3, flags
    NCCL_BUFFSIZE=8388608 NCCL_P2P_NET_CHUNKSIZE=524288), a HyperPod row (plugin 1.16.3: today's
    sizes) and p4dn (NCCL 2.9.9, no plugin version: NCCL's own sizes)."""
    rows = {r.system: r for r in load_measured(MEASURED)}
    older = row_env(rows["AWS p5.48xlarge x2"], on_efa=True)
    assert older["NCCL_NVLS_CHUNKSIZE"] == "131072"
    assert older["NCCL_BUFFSIZE"] == "8388608"
    assert older["NCCL_P2P_NET_CHUNKSIZE"] == "524288"
    hyperpod = row_env(rows["AWS p5.48xlarge x8 (SageMaker HyperPod; NCCL 2.28.7)"], on_efa=True)
    assert not {"NCCL_NVLS_CHUNKSIZE", "NCCL_NVLSTREE_MAX_CHUNKSIZE"} & set(hyperpod)
    p4dn = row_env(rows["AWS p4dn.24xlarge x2"], on_efa=True)
    assert p4dn["NCCL_BUFFSIZE"] == "4194304"
    assert "NCCL_BUFFSIZE" not in row_env(rows["AWS p4dn.24xlarge x2"], on_efa=False)
