"""Every prefix of a sweep is a valid Parquet dataset: one schema for every part (issue item 1)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scaleup.errors import UsageError
from scaleup.sweep import read_results, register_kind, run_sweep, unregister_kind
from scaleup.sweep.kinds import BUILTIN_KINDS, declared_columns
from scaleup.sweep.schema import TYPES, merge_types, sweep_schema, value_type, widen
from scaleup.sweep.store import MARKER, ResultStore


def _readable(path: Path) -> pa.Table:
    """What a user would do: both pyarrow entry points, which must agree."""
    table = pq.read_table(path)
    assert ds.dataset(path, format="parquet").to_table().num_rows == table.num_rows
    return table


_types = st.sampled_from(list(TYPES.values()))


@given(_types, _types, _types)
def test_merge_types_is_a_join(a: pa.DataType, b: pa.DataType, c: pa.DataType) -> None:
    """Commutative, associative, null the bottom: the order parts are written in is irrelevant."""
    assert merge_types(a, b) == merge_types(b, a)
    assert merge_types(merge_types(a, b), c) == merge_types(a, merge_types(b, c))
    assert merge_types(a, pa.null()) == a
    assert merge_types(a, a) == a


_values = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**70), 2**70),
    st.floats(allow_nan=False),
    st.text(max_size=5),
)
_batches = st.lists(
    st.lists(st.dictionaries(st.sampled_from("abcd"), _values, max_size=4), min_size=1, max_size=3),
    min_size=1,
    max_size=5,
)


@settings(
    max_examples=50, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(batches=_batches)
def test_any_prefix_of_appends_is_a_dataset(tmp_path_factory: Any, batches: list[Any]) -> None:
    """Rows whose columns come and go and change type, appended batch by batch: after every
    append ``pyarrow.parquet.read_table(dir)`` reads every row, with nothing lost."""
    out = tmp_path_factory.mktemp("prefix") / "r.parquet"
    store = ResultStore(out)
    store.prepare(schema=sweep_schema([], {}))
    n = 0
    for batch in batches:
        rows = [{"point_id": f"p{n + i}", "status": "ok", **row} for i, row in enumerate(batch)]
        n += len(rows)
        store.append(rows)
        table = _readable(out)
        assert table.num_rows == n
        assert table.schema.equals(store.schema())
        for row, got in zip(rows, table.to_pylist()[n - len(rows) :], strict=True):
            for key, value in row.items():
                column = table.schema.field(key).type
                if value is None:
                    assert got[key] is None
                elif value_type(value) == column and type(got[key]) is type(value):
                    assert got[key] == value
                elif column == pa.float64():
                    assert got[key] == pytest.approx(value)
                else:
                    assert got[key] is not None
    assert read_results(out).num_rows == n


@pytest.fixture
def failing_first(tmp_path: Path) -> list[dict[str, Any]]:
    """Points whose first one fails (its part has no result columns and a non-null error)."""
    return [{"kind": "failing", "x": x} for x in (3, 1, 2, 4, 5, 6)]


def test_partial_resumed_and_failing_sweeps_read_with_plain_pyarrow(
    tmp_path: Path, fake_kinds: Any, failing_first: list[dict[str, Any]]
) -> None:
    """Issue: 'Unsupported cast from string to null' on a partial sweep with an error."""
    out = tmp_path / "r.parquet"
    common = {"serial": True, "batch_size": 1, "kinds": fake_kinds}
    run_sweep(failing_first, out, max_points=1, **common)
    assert _readable(out).column("error").type == pa.string()
    run_sweep(failing_first, out, max_points=2, resume=True, **common)
    first = _readable(out)
    assert first.num_rows == 3
    assert first.schema.field("y").type == pa.int64()
    run_sweep(failing_first, out, resume=True, **common)
    table = _readable(out)
    assert sorted(table.column("x").to_pylist()) == [1, 2, 3, 4, 5, 6]
    assert table.column("status").to_pylist().count("error") == 1


def test_the_schema_is_fixed_before_any_point_runs(tmp_path: Path) -> None:
    """bench declares its columns: the marker holds them before the first point runs."""
    points = [
        {"kind": "bench", "topology": "dgx-h100", "collective": "all_reduce", "bytes": b}
        | {"dtype": "float32", "nranks": 0, "algo": "tuned", "proto": "tuned"}
        for b in (8, 1 << 20)
    ]
    bench = {"bench": declared_columns(BUILTIN_KINDS["bench"])}
    schema = sweep_schema(points, bench)
    types = {f.name: str(f.type) for f in schema}
    assert types["error"] == "string"
    assert types["time_us"] == "double"
    assert types["linkbw_gb_per_s"] == "double"
    assert types["requested_algo"] == "string"
    assert types["bytes"] == "int64"
    store = ResultStore(tmp_path / "r.parquet")
    store.prepare(schema=schema)
    marker = json.loads((tmp_path / "r.parquet" / MARKER).read_text())
    assert dict(map(tuple, marker["columns"])) == types


def test_mixed_point_values_share_one_type() -> None:
    points = [{"kind": "k", "v": 1}, {"kind": "k", "v": 2.5}, {"kind": "k", "w": "a"}]
    points += [{"kind": "k", "big": 1}, {"kind": "k", "big": 2**70}, {"kind": "k", "b": True}]
    schema = sweep_schema(points, {})
    assert schema.field("v").type == pa.float64()
    assert schema.field("w").type == pa.string()
    assert schema.field("big").type == pa.string(), "past 64 bits: text"
    assert schema.field("b").type == pa.bool_()
    assert widen(schema, pa.schema([("v", pa.string())])).field("v").type == pa.string()


def test_declared_columns_of_a_registered_kind(tmp_path: Path) -> None:
    def cube(point: dict[str, Any]) -> dict[str, Any]:
        return {"y": point["x"] ** 3}

    with pytest.raises(UsageError, match="column type 'float'"):
        register_kind("cube", cube, columns={"y": "float"})
    register_kind("cube", cube, columns={"y": "double"})
    try:
        out = tmp_path / "r.parquet"
        run_sweep([{"kind": "cube", "x": 2}], out, serial=True)
        assert _readable(out).schema.field("y").type == pa.float64()
    finally:
        unregister_kind("cube")


def test_parts_of_an_older_scaleup_are_read_and_resumed(
    tmp_path: Path, fake_kinds: Any, failing_first: list[dict[str, Any]]
) -> None:
    """Parts written with per-part types (an older scaleup): report reads them; --resume brings
    them to one schema, after which plain pyarrow reads the dataset."""
    out = tmp_path / "r.parquet"
    run_sweep(failing_first[:2], out, serial=True, kinds=fake_kinds)
    rows = read_results(out).to_pylist()
    for part in out.glob("part-*.parquet"):
        part.unlink()
    for i, row in enumerate(rows):  # one part per row, each typed by its own values
        pq.write_table(pa.Table.from_pylist([row]), out / f"part-{i:06d}.parquet")
    (out / MARKER).write_text('{"written_by": "scaleup sweep", "version": 1}\n')
    with pytest.raises(pa.ArrowNotImplementedError):
        pq.read_table(out)  # what the issue reported
    assert read_results(out).num_rows == 2
    run_sweep(failing_first, out, serial=True, resume=True, kinds=fake_kinds)
    assert _readable(out).num_rows == 6
