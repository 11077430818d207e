"""``scaleup sweep`` and ``scaleup report`` through typer's CliRunner (in-process)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from scaleup.cli import app
from scaleup.sweep_store import read_rows

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
SMALL = str(EXAMPLES / "sweep-small.toml")


@pytest.fixture
def runner() -> CliRunner:
    return CliRunner()


def test_serial_sweep_then_resume_then_report(runner: CliRunner, tmp_path: Path) -> None:
    out = tmp_path / "r.parquet"
    first = runner.invoke(
        app, ["sweep", SMALL, "-o", str(out), "--serial", "--max-points", "5", "--json", "-q"]
    )
    assert first.exit_code == 0, first.output
    summary = json.loads(first.stdout)
    assert (summary["total"], summary["evaluated"], summary["pending"]) == (12, 5, 7)
    again = runner.invoke(app, ["sweep", SMALL, "-o", str(out), "--serial"])
    assert again.exit_code == 2
    assert again.stderr.count("\n") == 1
    assert "--resume" in again.stderr
    resumed = runner.invoke(app, ["sweep", SMALL, "-o", str(out), "--serial", "--resume"])
    assert resumed.exit_code == 0, resumed.output
    assert "5 already done" in resumed.stdout
    rows = read_rows(out)
    assert len(rows) == 12
    assert {r["topology"] for r in rows} == {"dgx-h100", "mi300x-8"}
    report = runner.invoke(app, ["report", str(out), "-o", str(tmp_path / "rep"), "--json"])
    assert report.exit_code == 0, report.output
    written = json.loads(report.stdout)
    assert Path(written["index_html"]).is_file()
    assert Path(written["index_md"]).is_file()


def test_csv_output(runner: CliRunner, tmp_path: Path) -> None:
    out = tmp_path / "r.csv"
    result = runner.invoke(app, ["sweep", SMALL, "-o", str(out), "--serial", "-q"])
    assert result.exit_code == 0, result.output
    assert len(read_rows(out)) == 12


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        (
            "[[bench]]\ntopologies = ['dgx-h100']\ncollectives = ['allreduce']\nsizes = ['1M']\n",
            "bench[0].collectives",
        ),
        (
            "[[bench]]\ntopologies = ['nope']\ncollectives = ['all_reduce']\nsizes = ['1M']\n",
            "no preset named",
        ),
        ("nonsense", "not valid TOML"),
    ],
)
def test_bad_spec_exits_2_with_one_line(
    runner: CliRunner, tmp_path: Path, text: str, needle: str
) -> None:
    spec = tmp_path / "bad.toml"
    spec.write_text(text)
    result = runner.invoke(app, ["sweep", str(spec), "-o", str(tmp_path / "r.parquet"), "--serial"])
    assert result.exit_code == 2
    assert result.stderr.startswith(f"error: {spec}: ")
    assert result.stderr.count("\n") == 1
    assert needle in result.stderr
    assert not (tmp_path / "r.parquet").exists()


def test_conflicting_flags_and_missing_results(runner: CliRunner, tmp_path: Path) -> None:
    serial = runner.invoke(
        app, ["sweep", SMALL, "-o", str(tmp_path / "r.parquet"), "--serial", "--workers", "2"]
    )
    assert serial.exit_code == 2
    assert "--serial" in serial.stderr
    missing = runner.invoke(
        app, ["report", str(tmp_path / "none.parquet"), "-o", str(tmp_path / "rep")]
    )
    assert missing.exit_code == 2
    assert "no such results" in missing.stderr


@pytest.mark.slow
def test_default_local_cluster_of_processes(runner: CliRunner, tmp_path: Path) -> None:
    """The default path: a LocalCluster of worker processes, then the same rows as --serial."""
    spec = tmp_path / "cheap.toml"
    spec.write_text(
        (EXAMPLES / "sweep-small.toml").read_text()
        + 'algorithms = ["direct"]\nprotocols = ["simple"]\n'  # cheap points: this test times Dask
    )
    out, ref = tmp_path / "cluster.parquet", tmp_path / "serial.parquet"
    result = runner.invoke(
        app, ["sweep", str(spec), "-o", str(out), "--workers", "2", "--json", "-q"]
    )
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["mode"] == "local cluster"
    assert runner.invoke(app, ["sweep", str(spec), "-o", str(ref), "--serial", "-q"]).exit_code == 0

    def rows(path: Path) -> dict[str, dict[str, object]]:
        return {
            r["point_id"]: {k: v for k, v in r.items() if k != "elapsed_s"} for r in read_rows(path)
        }

    assert rows(out) == rows(ref)
