"""``scaleup bench --jobs`` through typer's runner: the examples' table, JSON and CSV, and bad
input as one line with exit code 2."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from scaleup.cli import app

runner = CliRunner()
EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
ONE_LINK = [
    "--topology", str(EXAMPLES / "two-pairs-one-link.toml"),
    "--jobs", str(EXAMPLES / "jobs-one-link.toml"),
]  # fmt: skip


def _run(*args: str):
    return runner.invoke(app, ["bench", *args])


def test_table_of_the_one_link_example():
    result = _run(*ONE_LINK)
    assert result.exit_code == 0, result.output
    assert "2 jobs sharing" in result.output
    rows = [line for line in result.output.splitlines() if "send_recv" in line]
    assert len(rows) == 2
    for row in rows:
        assert "52139.89" in row
        assert "104263.28" in row
        assert "2.000" in row


def test_json_and_csv_of_the_one_link_example():
    result = _run(*ONE_LINK, "--json")
    assert result.exit_code == 0, result.output
    records = json.loads(result.output)
    assert [r["name"] for r in records] == ["a", "b"]
    assert records[0]["ranks"] == [0, 2]
    assert records[0]["slowdown"] == pytest.approx(1.9996835, rel=1e-6)
    assert records[0]["busbw_together_gb_per_s"] == pytest.approx(10.29837, rel=1e-5)
    csv = _run(*ONE_LINK, "--csv")
    assert csv.exit_code == 0, csv.output
    head, *lines = csv.output.strip().splitlines()
    assert head.startswith("name,collective,ranks,nranks,bytes")
    assert len(lines) == 2


def test_the_two_server_example_runs():
    result = _run("--topology", "2xdgx-h100", "--jobs", str(EXAMPLES / "jobs-2xdgx-h100.toml"),
                  "--json")  # fmt: skip
    assert result.exit_code == 0, result.output
    records = {r["name"]: r for r in json.loads(result.output)}
    assert set(records) == {"tp0", "tp1", "dp", "pp"}
    assert records["tp0"]["slowdown"] == pytest.approx(1.0)
    assert records["pp"]["slowdown"] > 1.5  # it shares GPU 0's NIC with dp
    assert all(r["slowdown"] >= 1 - 1e-9 for r in records.values())


@pytest.mark.parametrize(
    ("text", "extra", "message"),
    [
        (
            '[[job]]\nname = "a"\ncollective = "all_sum"\nranks = "0-1"\nsize = "1M"\n',
            [],
            "job[0].collective: unknown collective",
        ),
        (
            '[[job]]\nname = "a"\ncollective = "all_reduce"\nranks = "0-8"\nsize = "1M"\n',
            [],
            "job[0].ranks: rank 8 out of range",
        ),
        ("[[job]\n", [], "not valid TOML"),
        (
            '[[job]]\nname = "a"\ncollective = "all_reduce"\nranks = "0-1"\nsize = "1M"\n'
            'algorithm = "bogus"\n',
            [],
            "job[0] (a): unknown algorithm",
        ),
        (
            '[[job]]\nname = "a"\ncollective = "all_reduce"\nranks = "0-1"\nsize = "1M"\n',
            ["--runtime", "shm"],
            "--jobs takes no --runtime",
        ),
        (
            '[[job]]\nname = "a"\ncollective = "all_reduce"\nranks = "0-1"\nsize = "1M"\n',
            ["--algo", "ring"],
            "--jobs takes no --algo",
        ),
        (
            '[[job]]\nname = "a"\ncollective = "all_reduce"\nranks = "0-1"\nsize = "1M"\n',
            ["--topology", "dgx-h100,dgx-a100"],
            "one fabric",
        ),
    ],  # fmt: skip
)
def test_bad_input_exits_2_with_one_line(tmp_path, text, extra, message):
    path = tmp_path / "jobs.toml"
    path.write_text(text)
    result = _run("--jobs", str(path), *extra)
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output
    assert len(result.output.strip().splitlines()) == 1
    assert result.output.startswith("error:")
    assert message in result.output


def test_a_missing_file_exits_2(tmp_path):
    result = _run("--jobs", str(tmp_path / "nope.toml"))
    assert result.exit_code == 2
    assert "nope.toml: cannot read" in result.output
