"""Reports: PNG plots and index pages (Markdown, self-contained HTML) from a sweep's results."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from scaleup.cli.sweep_report import build_report
from scaleup.sweep import KindFunction, point_id, run_sweep

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def _points() -> list[dict[str, Any]]:
    points: list[dict[str, Any]] = []
    for topology in ("dgx-h100", "mi300x-8"):
        for nbytes in (1024, 32768, 1 << 20, 1 << 24):
            points.append(
                {
                    "kind": "bench",
                    "topology": topology,
                    "collective": "all_reduce",
                    "bytes": nbytes,
                    "dtype": "float32",
                    "nranks": 0,
                    "algo": "tuned",
                    "proto": "tuned",
                }
            )
            for algo in ("ring", "tree"):
                points.append(
                    {
                        "kind": "bench",
                        "topology": "dgx-h100",
                        "collective": "all_gather",
                        "bytes": nbytes,
                        "dtype": "float32",
                        "nranks": 0,
                        "algo": algo,
                        "proto": "simple",
                    }
                )
        for tp in (1, 2, 4, 8):
            for pp in (1, 2):
                points.append(
                    {"kind": "plan", "topology": topology, "model": "llama-70b", "tp": tp, "pp": pp}
                )
    points += [{"kind": "failing", "x": 3}, {"kind": "failing", "x": 4}]
    return points


@pytest.fixture(scope="module")
def results(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from sweep_fake_kinds import FAKES

    out = tmp_path_factory.mktemp("report") / "results.parquet"
    run_sweep(_points(), out, serial=True, kinds=FAKES)
    return out


def test_report_writes_pngs_and_index_pages(results: Path, tmp_path: Path) -> None:
    summary = build_report(results, tmp_path / "report")
    names = set(summary.images)
    assert {"busbw_all_reduce.png", "busbw_all_gather.png", "best_algo_all_reduce.png"} <= names
    assert "algos_all_gather_dgx-h100.png" in names
    assert {"plan_memory_llama-70b.png", "plan_step_llama-70b.png"} <= names
    for name in names:
        data = (tmp_path / "report" / name).read_bytes()
        assert data.startswith(PNG_MAGIC)
        assert len(data) > 5000
    assert (summary.points, summary.errors) == (len({point_id(p) for p in _points()}), 1)
    md = (tmp_path / "report" / "index.md").read_text()
    for name in names:
        assert f"]({name})" in md
    assert "## Peak bus bandwidth" in md
    assert "x = 3 is not allowed" in md
    page = (tmp_path / "report" / "index.html").read_text()
    assert page.count("src='data:image/png;base64,") == len(names)
    assert not re.search(r"src=['\"](?!data:)", page), "the HTML must not link outside itself"
    assert "<table>" in page


def test_report_of_csv_and_only_errors(tmp_path: Path, fake_kinds: dict[str, KindFunction]) -> None:
    run_sweep([{"kind": "failing", "x": 3}], tmp_path / "r.csv", serial=True, kinds=fake_kinds)
    summary = build_report(tmp_path / "r.csv", tmp_path / "out", title="only errors")
    assert summary.images == []
    assert (summary.points, summary.errors) == (1, 1)
    assert "only errors" in (tmp_path / "out" / "index.html").read_text()


def test_real_planner_points_and_their_maps(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Real ``plan`` points (collective times stubbed at 1 ms: tests the sweep, not the sim)."""
    import functools
    import importlib

    module = importlib.import_module("scaleup.workload.plan")
    monkeypatch.setattr(
        module, "plan", functools.partial(module.plan, comm_time=lambda *a, **k: 1e-3)
    )
    points = [
        {"kind": "plan", "topology": t, "model": "llama-70b", "tp": tp}
        for t in ("dgx-h100", "mi300x-8")
        for tp in (1, 2, 4, 8)
    ]
    run_sweep(points, tmp_path / "plans.parquet", serial=True)
    summary = build_report(tmp_path / "plans.parquet", tmp_path / "rep")
    assert summary.errors == 0
    assert {"plan_memory_llama-70b.png", "plan_step_llama-70b.png"} <= set(summary.images)
    md = (tmp_path / "rep" / "index.md").read_text()
    assert "memory_fraction" in md
    assert "step_time_s" in md


def test_report_says_what_produced_it(tmp_path: Path) -> None:
    from sweep_fake_kinds import FAKES

    from scaleup import __version__
    from scaleup.sweep import read_provenance

    provenance = {"spec": "specs/my sweep.toml", "scaleup_version": "0.0.9", "started_utc": "then"}
    out = tmp_path / "results.parquet"
    run_sweep(_points()[:3], out, serial=True, kinds=FAKES, provenance=provenance)
    assert read_provenance(out) == provenance
    build_report(out, tmp_path / "rep")
    for page in ("index.md", "index.html"):
        text = (tmp_path / "rep" / page).read_text()
        assert "sweep spec: specs/my sweep.toml" in text
        assert "Swept by scaleup 0.0.9, started then" in text
        assert f"Report written by scaleup {__version__} on " in text
        assert re.search(r"on \d{4}-\d\d-\d\d \d\d:\d\d UTC", text)
        assert "None" not in re.sub(r"data:image/png;base64,[^']*", "", text)


def test_report_of_a_csv_says_the_spec_is_not_recorded(
    tmp_path: Path, fake_kinds: dict[str, KindFunction]
) -> None:
    run_sweep(_points()[:2], tmp_path / "r.csv", serial=True, kinds=fake_kinds)
    build_report(tmp_path / "r.csv", tmp_path / "out")
    assert "sweep spec: not recorded" in (tmp_path / "out" / "index.md").read_text()


def test_sweep_command_records_the_spec_as_given() -> None:
    from scaleup.cli.sweep import _provenance

    recorded = _provenance(Path("examples/../examples/sweep-small.toml"))
    assert recorded["spec"] == "examples/../examples/sweep-small.toml"
    assert set(recorded) == {"spec", "scaleup_version", "started_utc"}
