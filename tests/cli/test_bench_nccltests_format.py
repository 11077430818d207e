"""``scaleup bench`` reads as nccl-tests 2.x output: its header, its 13 columns (out-of-place and
in-place groups with ``#wrong``) as a log parser splits them, its footer; and its flags."""

from __future__ import annotations

import json
import re

import pytest
from hypothesis import given
from hypothesis import strategies as st
from typer.testing import CliRunner

from scaleup.cli import app
from scaleup.cli.bench import split_op
from scaleup.cli.bench_table import footer_lines, table_lines
from scaleup.errors import UsageError
from scaleup.report import BenchRow

runner = CliRunner()

#: nccl-tests 2.x's header, verbatim from an all_reduce_perf log.
NCCL_TITLE = (
    "#                                                              out-of-place"
    "                       in-place          "
)
NCCL_NAMES = (
    "#       size         count      type   redop    root     time   algbw   busbw #wrong"
    "     time   algbw   busbw #wrong"
)
NCCL_UNITS = (
    "#        (B)    (elements)                               (us)  (GB/s)  (GB/s)      "
    "      (us)  (GB/s)  (GB/s)"
)
_OUT_OF_BOUNDS = re.compile(r"^# Out of bounds values : (\d+) (OK|FAILED)$", re.MULTILINE)
_AVG_BUSBW = re.compile(r"^# Avg bus bandwidth\s+:\s+([0-9.e+-]+)", re.MULTILINE)


def parse_nccl_tests(output: str) -> list[dict[str, object]]:
    """What a typical nccl-tests log parser does: split data lines on whitespace and read the
    first 13 columns by position."""
    rows = []
    for line in output.splitlines():
        fields = line.split()
        if not fields or line.startswith("#") or not fields[0].isdigit() or len(fields) < 13:
            continue
        rows.append({
            "size": int(fields[0]), "count": int(fields[1]), "type": fields[2],
            "redop": fields[3], "root": int(fields[4]),
            "oop_time": float(fields[5]), "oop_algbw": float(fields[6]),
            "oop_busbw": float(fields[7]), "oop_wrong": fields[8],
            "ip_time": float(fields[9]), "ip_algbw": float(fields[10]),
            "ip_busbw": float(fields[11]), "ip_wrong": fields[12],
        })  # fmt: skip
    return rows


def _bench(*args: str) -> str:
    result = runner.invoke(app, ["bench", *args])
    assert result.exit_code == 0, result.output
    return result.output


def test_simulated_table_parses_as_nccl_tests():
    args = ("-b", "1K", "-e", "1G", "-f", "32")
    output = _bench(*args)
    rows = json.loads(_bench(*args, "--json"))
    parsed = parse_nccl_tests(output)
    assert len(parsed) == len(rows) == 5
    for got, row in zip(parsed, rows, strict=True):
        assert (got["size"], got["count"], got["type"]) == (row["bytes"], row["count"], "float")
        assert (got["redop"], got["root"]) == ("sum", -1)
        for group in ("oop", "ip"):  # the simulator times both groups alike; nothing checked
            assert got[f"{group}_time"] == pytest.approx(row["time_us"], rel=1e-3, abs=0.01)
            assert got[f"{group}_busbw"] == pytest.approx(row["busbw_gb_per_s"], abs=0.006)
            assert got[f"{group}_algbw"] == pytest.approx(row["algbw_gb_per_s"], abs=0.006)
            assert got[f"{group}_wrong"] == "N/A"
    lines = output.splitlines()
    title = lines.index(NCCL_TITLE)
    assert lines[title + 1].startswith(NCCL_NAMES)
    assert lines[title + 2].startswith(NCCL_UNITS)
    assert lines[title - 1] == "#"  # as nccl-tests separates the device list from the table
    assert lines[title + 1][len(NCCL_NAMES) :].split() == ["linkbw", "algo", "proto", "channels"]
    assert _OUT_OF_BOUNDS.search(output).groups() == ("0", "OK")
    avg = float(_AVG_BUSBW.search(output).group(1))
    assert avg == pytest.approx(sum(r["busbw_gb_per_s"] for r in rows) / len(rows), rel=1e-5)
    assert lines[-1] == "#"


def test_runtime_table_counts_wrong_elements():
    output = _bench("--runtime", "shm", "-g", "2", "-b", "1K", "-e", "2K", "-n", "2", "-w", "0")
    parsed = parse_nccl_tests(output)
    assert [r["size"] for r in parsed] == [1024, 2048]
    assert all((r["oop_wrong"], r["ip_wrong"]) == ("0", "0") for r in parsed)
    assert _OUT_OF_BOUNDS.search(output).groups() == ("0", "OK")
    unchecked = _bench("--runtime", "shm", "-g", "2", "-b", "1K", "-e", "1K", "-n", "1", "-c", "0")
    assert parse_nccl_tests(unchecked)[0]["oop_wrong"] == "N/A"


_ROW = st.builds(
    BenchRow,
    topology=st.just("t"),
    collective=st.just("all_reduce"),
    bytes=st.integers(0, 1 << 40),
    count=st.integers(0, 1 << 38),
    dtype=st.sampled_from(("float32", "float16", "bfloat16", "int32")),
    redop=st.sampled_from(("sum", "avg", "none")),
    root=st.integers(-1, 1023),
    time_us=st.floats(0.01, 1e7),
    algbw_gb_per_s=st.floats(0, 9999),
    busbw_gb_per_s=st.floats(0, 9999),
    linkbw_gb_per_s=st.none() | st.floats(0, 9999),
    algo=st.sampled_from(("ring", "nvls_tree", "direct")),
    proto=st.sampled_from(("ll", "ll128", "simple")),
    channels=st.integers(1, 64),
    nranks=st.integers(1, 1024),
    in_place_time_us=st.none() | st.floats(0.01, 1e7),
    wrong=st.none() | st.integers(0, 10**9),
    in_place_wrong=st.none() | st.integers(0, 10**9),
)


@given(rows=st.lists(_ROW, min_size=1, max_size=4))
def test_any_rows_keep_the_13_columns(rows):
    """Whatever the values (wide ones overflow their width, as nccl-tests' do), a whitespace
    split gives nccl-tests' 13 columns in order, and the footer counts every wrong element."""
    lines = table_lines({"t": rows})
    parsed = parse_nccl_tests("\n".join(lines))
    assert len(parsed) == len(rows)
    for got, row in zip(parsed, rows, strict=True):
        assert (got["size"], got["count"], got["root"]) == (row.bytes, row.count, row.root)
        wrong = "N/A" if row.wrong is None else str(row.wrong)
        assert got["oop_wrong"] == wrong
        assert got["oop_time"] == pytest.approx(row.time_us, rel=0.01, abs=0.01)
        assert got["ip_time"] == pytest.approx(row.in_place_us, rel=0.01, abs=0.01)
    footer = "\n".join(footer_lines({"t": rows}))
    total = sum((r.wrong or 0) + (r.in_place_wrong or 0) for r in rows)
    assert _OUT_OF_BOUNDS.search(footer).group(1) == str(total)


@pytest.mark.parametrize(
    ("values", "collective", "expected"),
    [
        (None, None, ("all_reduce", "sum")),
        (["max"], None, ("all_reduce", "max")),
        (["reduce", "MIN"], None, ("reduce", "min")),  # scaleup's old --op, with nccl-tests' -o
        (["avg"], "reduce_scatter_perf", ("reduce_scatter", "avg")),
        (None, "alltoall_perf", ("all_to_all", "sum")),
        (["broadcast"], "broadcast", ("broadcast", "sum")),
    ],
)
def test_split_op(values, collective, expected):
    assert split_op(values, collective) == expected


@pytest.mark.parametrize(
    ("values", "collective", "source"),
    [
        (["mulsum"], None, "-o"),
        (["sum", "max"], None, "-o"),
        (["all_gather"], "reduce", "--collective"),
        (None, "gather", "--collective"),
    ],
)
def test_split_op_errors_name_the_flag(values, collective, source):
    with pytest.raises(UsageError) as caught:
        split_op(values, collective)
    assert caught.value.source == source


def test_iterations_do_not_change_the_simulated_time():
    base = json.loads(_bench("-b", "1M", "-e", "1M", "--json"))
    counted = json.loads(_bench("-b", "1M", "-e", "1M", "-n", "7", "-w", "3", "-c", "0", "--json"))
    assert base == counted
    assert not {"in_place_time_us", "wrong", "in_place_wrong"} & set(base[0])  # JSON as before


def test_ngpus_is_the_simulated_rank_count():
    rows = json.loads(_bench("-g", "4", "-b", "1M", "-e", "1M", "--json"))
    assert rows[0]["nranks"] == 4
    assert json.loads(_bench("--ranks", "4", "-b", "1M", "-e", "1M", "--json")) == rows
