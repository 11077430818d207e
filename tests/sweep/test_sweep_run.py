"""Running sweeps: serial and on a LocalCluster, interrupted and resumed, failures recorded."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from scaleup.errors import UsageError
from scaleup.sweep import (
    KindFunction,
    ResultStore,
    SweepProgress,
    evaluate_point,
    point_id,
    read_rows,
    run_sweep,
)

#: Columns that legitimately differ between two runs of the same point.
TIMING = ("elapsed_s",)


def _grid(n: int, kind: str = "square") -> list[dict[str, Any]]:
    return [{"kind": kind, "x": x} for x in range(n)]


def _by_id(path: Path) -> dict[str, dict[str, Any]]:
    return {r["point_id"]: {k: v for k, v in r.items() if k not in TIMING} for r in read_rows(path)}


@pytest.fixture(scope="module")
def client() -> Iterator[Any]:
    """A 2-worker in-process LocalCluster (threads: starts in about a second)."""
    distributed = pytest.importorskip("distributed")
    cluster = distributed.LocalCluster(
        n_workers=2, threads_per_worker=1, processes=False, dashboard_address=None, silence_logs=40
    )
    with cluster, distributed.Client(cluster, set_as_default=False) as c:
        yield c


class _StopAfter:
    """A progress callback that raises KeyboardInterrupt (a Ctrl-C) once ``k`` points are done."""

    def __init__(self, k: int) -> None:
        self.k = k
        self.seen: list[SweepProgress] = []

    def __call__(self, progress: SweepProgress) -> None:
        self.seen.append(progress)
        if progress.done >= self.k:
            raise KeyboardInterrupt


def test_evaluate_point_records_a_failure_as_data(fake_kinds: dict[str, KindFunction]) -> None:
    ok = evaluate_point({"kind": "failing", "x": 2}, fake_kinds)
    bad = evaluate_point({"kind": "failing", "x": 3}, fake_kinds)
    assert (ok["status"], ok["y"], ok["x"]) == ("ok", 4, 2)
    assert bad["status"] == "error"
    assert bad["error_type"] == "ValueError"
    assert "x = 3 is not allowed" in bad["error"]
    assert bad["point_id"] == point_id({"kind": "failing", "x": 3})
    unknown = evaluate_point({"kind": "nope"}, fake_kinds)
    assert unknown["status"] == "error"
    assert "unknown point kind 'nope'" in unknown["error"]


def test_failing_point_does_not_stop_the_sweep(
    tmp_path: Path, fake_kinds: dict[str, KindFunction]
) -> None:
    summary = run_sweep(_grid(8, "failing"), tmp_path / "r.parquet", serial=True, kinds=fake_kinds)
    rows = read_rows(tmp_path / "r.parquet")
    assert (summary.total, summary.evaluated, summary.errors, summary.pending) == (8, 8, 1, 0)
    assert len(rows) == 8
    assert [r["x"] for r in rows if r["status"] == "error"] == [3]
    assert all(r["y"] == r["x"] ** 2 for r in rows if r["status"] == "ok")


def test_interrupted_dask_sweep_resumes_to_the_serial_result(
    tmp_path: Path, fake_kinds: dict[str, KindFunction], client: Any
) -> None:
    points = _grid(40, "slow_failing")  # 10 tasks of 4 points, 80 ms each, on 2 workers
    out = tmp_path / "dask.parquet"
    stop = _StopAfter(4)
    with pytest.raises(KeyboardInterrupt):
        run_sweep(points, out, client=client, batch_size=4, progress=stop, kinds=fake_kinds)
    saved = _by_id(out)
    assert 4 <= len(saved) < 40, "the rows finished before Ctrl-C are on disk, the rest are not"
    assert stop.seen[-1].done == len(saved)
    summary = run_sweep(points, out, client=client, batch_size=4, resume=True, kinds=fake_kinds)
    assert summary.resumed == len(saved)
    assert summary.evaluated == 40 - len(saved)
    assert summary.pending == 0
    final = _by_id(out)
    assert {k: final[k] for k in saved} == saved, "resume did not recompute finished points"
    run_sweep(points, tmp_path / "serial.parquet", serial=True, kinds=fake_kinds)
    assert final == _by_id(tmp_path / "serial.parquet")
    assert len(list(out.glob("part-*.parquet"))) == 1, "a finished sweep compacts its parts"


def test_max_points_then_resume_serial_csv(
    tmp_path: Path, fake_kinds: dict[str, KindFunction]
) -> None:
    points = _grid(5, "failing") + _grid(5, "square")
    out = tmp_path / "r.csv"
    first = run_sweep(points, out, serial=True, max_points=3, kinds=fake_kinds)
    assert (first.evaluated, first.pending) == (3, 7)
    second = run_sweep(points, out, serial=True, resume=True, kinds=fake_kinds)
    assert (second.resumed, second.evaluated, second.pending) == (3, 7, 0)
    rows = read_rows(out)
    assert len(rows) == 10
    assert sorted(r["x"] for r in rows) == sorted([*range(5), *range(5)])
    assert sum(r["status"] == "error" for r in rows) == 1


def test_retry_errors_reevaluates_only_failures(
    tmp_path: Path, fake_kinds: dict[str, KindFunction]
) -> None:
    out = tmp_path / "r.parquet"
    run_sweep(_grid(5, "failing"), out, serial=True, kinds=fake_kinds)
    fixed = {**fake_kinds, "failing": fake_kinds["square"]}
    again = run_sweep(
        _grid(5, "failing"), out, serial=True, resume=True, retry_errors=True, kinds=fixed
    )
    assert (again.resumed, again.evaluated, again.errors) == (4, 1, 0)
    rows = read_rows(out)
    assert len(rows) == 5
    assert all(r["status"] == "ok" for r in rows)


def test_existing_output_needs_resume_or_overwrite(
    tmp_path: Path, fake_kinds: dict[str, KindFunction]
) -> None:
    out = tmp_path / "r.parquet"
    run_sweep(_grid(2), out, serial=True, kinds=fake_kinds)
    with pytest.raises(UsageError, match="--resume"):
        run_sweep(_grid(2), out, serial=True, kinds=fake_kinds)
    summary = run_sweep(_grid(3), out, serial=True, overwrite=True, kinds=fake_kinds)
    assert (summary.resumed, summary.evaluated) == (0, 3)
    with pytest.raises(UsageError, match="serial"):
        run_sweep(_grid(2), out, serial=True, scheduler="tcp://127.0.0.1:1", overwrite=True)


def test_repeated_points_run_once_and_progress_counts(
    tmp_path: Path, fake_kinds: dict[str, KindFunction]
) -> None:
    seen: list[SweepProgress] = []
    summary = run_sweep(
        _grid(3) * 2, tmp_path / "r.parquet", serial=True, progress=seen.append, kinds=fake_kinds
    )
    assert summary.total == 3
    assert seen[0].done == 0
    assert seen[-1].done == seen[-1].total == 3


def test_store_unifies_columns_across_parts(tmp_path: Path) -> None:
    store = ResultStore(tmp_path / "r.parquet")
    store.append([{"point_id": "a", "v": 1, "s": None}])
    store.append([{"point_id": "b", "v": 2.5, "s": "x", "new": True}])
    store.append([{"point_id": "a", "v": 3, "s": 7}])  # a retried point: the last row wins
    rows = {r["point_id"]: r for r in read_rows(tmp_path / "r.parquet")}
    assert rows["a"]["v"] == 3.0
    assert rows["b"] == {"point_id": "b", "v": 2.5, "s": "x", "new": True}
    assert rows["a"]["s"] == "7"
    store.compact()
    assert len(list((tmp_path / "r.parquet").glob("part-*.parquet"))) == 1
    assert {r["point_id"] for r in read_rows(tmp_path / "r.parquet")} == {"a", "b"}


def _real_points() -> list[dict[str, Any]]:
    """Real simulator points, cheap ones: a fixed algorithm and protocol, three small sizes."""
    return [
        {
            "kind": "bench",
            "topology": t,
            "collective": c,
            "bytes": b,
            "dtype": "float32",
            "nranks": 0,
            "algo": "direct",
            "proto": "simple",
        }
        for t in ("dgx-h100", "mi300x-8")
        for c in ("all_reduce", "all_gather")
        for b in (1024, 65536, 1 << 20)
    ] + [
        {
            "kind": "bench",
            "topology": "dgx-h100",
            "collective": "all_to_all",
            "bytes": 4096,
            "dtype": "float32",
            "nranks": 0,
            "algo": "ring",
            "proto": "simple",
        }
    ]  # ring has no all_to_all: an error row


def test_real_bench_points_stopped_and_resumed_on_dask_equal_serial(
    tmp_path: Path, client: Any
) -> None:
    points = _real_points()
    out = tmp_path / "dask.parquet"
    first = run_sweep(points, out, client=client, batch_size=2, max_points=5)
    assert (first.evaluated, first.pending) == (5, len(points) - 5)
    rest = run_sweep(points, out, client=client, batch_size=2, resume=True)
    assert (rest.resumed, rest.evaluated, rest.pending) == (5, len(points) - 5, 0)
    run_sweep(points, tmp_path / "serial.parquet", serial=True)
    final = _by_id(out)
    assert final == _by_id(tmp_path / "serial.parquet")
    errors = [r for r in final.values() if r["status"] == "error"]
    assert [r["collective"] for r in errors] == ["all_to_all"]
    ok = [r for r in final.values() if r["status"] == "ok"]
    assert all(r["busbw_gb_per_s"] > 0 and r["requested_algo"] == r["algo"] == "direct" for r in ok)
    assert {r["topology"] for r in ok} == {"dgx-h100", "mi300x-8"}


def test_serial_interrupt_keeps_finished_rows(
    tmp_path: Path, fake_kinds: dict[str, KindFunction]
) -> None:
    out = tmp_path / "r.parquet"
    with pytest.raises(KeyboardInterrupt):
        run_sweep(
            _grid(30), out, serial=True, batch_size=7, progress=_StopAfter(7), kinds=fake_kinds
        )
    assert len(_by_id(out)) == 7
    summary = run_sweep(_grid(30), out, serial=True, resume=True, kinds=fake_kinds)
    assert (summary.resumed, summary.evaluated) == (7, 23)


def test_scheduler_address_connects_to_a_running_cluster(
    tmp_path: Path, fake_kinds: dict[str, KindFunction], client: Any
) -> None:
    address = client.scheduler.address
    summary = run_sweep(
        _grid(6, "failing"), tmp_path / "r.parquet", scheduler=address, kinds=fake_kinds
    )
    assert summary.mode == f"scheduler {address}"
    assert (summary.workers, summary.evaluated, summary.errors) == (2, 6, 1)
    assert len(client.scheduler_info()["workers"]) == 2, "the cluster outlives the sweep"


@pytest.mark.parametrize("address", ["nonsense", "bogus://host:1", "tcp://127.0.0.1:"])
def test_malformed_scheduler_address_is_a_usage_error(
    tmp_path: Path, fake_kinds: dict[str, KindFunction], address: str
) -> None:
    pytest.importorskip("distributed")
    with pytest.raises(UsageError, match="cannot connect to the Dask scheduler"):
        run_sweep(_grid(2), tmp_path / "r.parquet", scheduler=address, kinds=fake_kinds)
    again = run_sweep(_grid(2), tmp_path / "r.parquet", serial=True, kinds=fake_kinds)
    assert again.evaluated == 2, "an output with no rows yet is not 'already there'"


def test_unreachable_scheduler_is_an_error_within_the_connect_timeout(
    tmp_path: Path, fake_kinds: dict[str, KindFunction]
) -> None:
    """Issue: 30 s (Dask's connect timeout), then a traceback; now the sweep's own timeout."""
    import time

    pytest.importorskip("distributed")
    start = time.monotonic()
    with pytest.raises(UsageError, match="cannot connect to the Dask scheduler") as caught:
        run_sweep(
            _grid(2),
            tmp_path / "r.parquet",
            scheduler="tcp://127.0.0.1:1",
            connect_timeout_s=0.5,
            kinds=fake_kinds,
        )
    assert time.monotonic() - start < 10
    assert caught.value.source == "tcp://127.0.0.1:1"
