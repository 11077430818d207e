"""The results store removes only what a sweep wrote, and survives a damaged part file."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from scaleup.cli import app
from scaleup.sweep import read_rows
from scaleup.sweep.store import MARKER

GRID = '[[grid]]\nkind = "square"\nparams = {{ x = {xs} }}\n'


@pytest.fixture
def spec(tmp_path: Path, registered_fakes: object) -> Path:
    path = tmp_path / "spec.toml"
    path.write_text(GRID.format(xs=list(range(6))))
    return path


def _sweep(spec: Path, out: Path, *flags: str) -> object:
    return CliRunner().invoke(app, ["sweep", str(spec), "-o", str(out), "--serial", "-q", *flags])


def _one_line_exit_2(result: object, needle: str) -> None:
    assert result.exit_code == 2, result.output  # type: ignore[attr-defined]
    assert result.stderr.count("\n") == 1, result.stderr  # type: ignore[attr-defined]
    assert needle in result.stderr  # type: ignore[attr-defined]


def test_force_never_deletes_files_a_sweep_did_not_write(spec: Path, tmp_path: Path) -> None:
    """Issue 10: --force removed the whole directory once any part-*.parquet was in it."""
    out = tmp_path / "data"
    assert _sweep(spec, out).exit_code == 0
    (out / "notes.txt").write_text("mine")
    _one_line_exit_2(_sweep(spec, out, "--force"), "notes.txt")
    assert (out / "notes.txt").read_text() == "mine"
    assert len(read_rows(out)) == 6, "nothing was removed"


def test_force_on_a_directory_without_the_marker_is_refused(spec: Path, tmp_path: Path) -> None:
    out = tmp_path / "theirs"
    out.mkdir()
    (out / "part-000000.parquet").write_bytes(b"not ours")
    (out / "thesis.tex").write_text("years of work")
    for flags in ((), ("--force",), ("--resume",)):
        _one_line_exit_2(_sweep(spec, out, *flags), "not a sweep's output")
    assert sorted(p.name for p in out.iterdir()) == ["part-000000.parquet", "thesis.tex"]


def test_an_existing_directory_is_not_silently_written_into(spec: Path, tmp_path: Path) -> None:
    out = tmp_path / "photos"
    out.mkdir()
    (out / "cat.jpg").write_bytes(b"\xff\xd8")
    _one_line_exit_2(_sweep(spec, out), "not touching it")
    assert [p.name for p in out.iterdir()] == ["cat.jpg"]


def test_force_replaces_a_sweeps_own_output(spec: Path, tmp_path: Path) -> None:
    out = tmp_path / "r.parquet"
    empty = tmp_path / "empty"
    empty.mkdir()
    assert _sweep(spec, empty).exit_code == 0, "an empty directory is fine"
    assert _sweep(spec, out).exit_code == 0
    _one_line_exit_2(_sweep(spec, out), "--resume")
    spec.write_text(GRID.format(xs=[10, 11]))
    assert _sweep(spec, out, "--force").exit_code == 0
    assert sorted(r["x"] for r in read_rows(out)) == [10, 11]
    assert (out / MARKER).is_file()


def test_force_never_replaces_a_foreign_csv(spec: Path, tmp_path: Path) -> None:
    out = tmp_path / "accounts.csv"
    out.write_text("name,balance\nalice,10\n")
    _one_line_exit_2(_sweep(spec, out, "--force"), "not a sweep's CSV")
    assert out.read_text() == "name,balance\nalice,10\n"
    ours = tmp_path / "r.csv"
    assert _sweep(spec, ours).exit_code == 0
    assert _sweep(spec, ours, "--force").exit_code == 0


@pytest.mark.parametrize("where", ["file/sub.parquet", "file/sub.csv", "dev-null"])
def test_unwritable_output_is_one_line(spec: Path, tmp_path: Path, where: str) -> None:
    (tmp_path / "file").write_text("x")
    out = Path("/dev/null") if where == "dev-null" else tmp_path / where
    result = _sweep(spec, out)
    assert result.exit_code == 2, result.output
    assert result.stderr.count("\n") == 1
    assert result.stderr.startswith(f"error: {out}: ")


def _damage_a_part(out: Path) -> Path:
    parts = sorted(out.glob("part-*.parquet"))
    part = parts[0]
    part.write_bytes(part.read_bytes()[:-20])  # a write cut short
    return part


def test_damaged_part_is_named_by_report_and_recomputed_by_resume(
    spec: Path, tmp_path: Path
) -> None:
    out = tmp_path / "r.parquet"
    assert _sweep(spec, out, "--max-points", "2").exit_code == 0
    assert _sweep(spec, out, "--resume", "--max-points", "2").exit_code == 0
    part = _damage_a_part(out)
    report = CliRunner().invoke(app, ["report", str(out), "-o", str(tmp_path / "rep")])
    _one_line_exit_2(report, f"error: {part}: damaged Parquet part")
    resumed = _sweep(spec, out, "--resume")
    assert resumed.exit_code == 0, resumed.output
    assert f"note: {part} was damaged" in resumed.stderr
    rows = read_rows(out)
    assert sorted(r["x"] for r in rows) == list(range(6)), "the damaged part's points were redone"
    assert (out / f".damaged-{part.name}").is_file(), "set aside, not deleted"
