"""``scaleup schedule`` with MSCCL XML files (typer's CliRunner): verify, time, export; bad XML
is one line and exit 2."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from tests.collectives.msccl_cases import algo, gpu, ring_all_reduce, step, tb
from typer.testing import CliRunner

from scaleup.cli import app

runner = CliRunner()


def _run(*args: str):
    return runner.invoke(app, ["schedule", *args])


def test_imported_ring_verifies_and_times_like_scaleup_ring(tmp_path: Path) -> None:
    path = tmp_path / "ring.xml"
    path.write_text(ring_all_reduce(8))
    checked = _run("verify", "--file", str(path), "--count", "1M", "--dtype", "int32")
    assert checked.exit_code == 0, checked.output
    assert checked.output.startswith("ok: msccl:ring")
    timed = _run("time", "--file", str(path), "--count", "1M", "--json")
    assert timed.exit_code == 0, timed.output
    imported = json.loads(timed.output)
    native = json.loads(
        _run("time", "ring", "all_reduce", "--ranks", "8", "--count", "1M", "--json").output
    )
    assert imported["topology"] == native["topology"]
    assert imported["time_us"] == pytest.approx(native["time_us"], rel=0.01)
    assert imported["busbw_gb_per_s"] > 0


def test_export_writes_xml_that_verifies_and_times_the_same(tmp_path: Path) -> None:
    out = tmp_path / "ring.xml"
    args = ("ring", "all_reduce", "--ranks", "4", "--count", "1M", "--channels", "2")
    exported = _run("export", *args, "--format", "msccl-xml", "-o", str(out))
    assert exported.exit_code == 0, exported.output
    assert out.read_text().startswith('<algo name="ring" proto="Simple"')
    checked = _run("verify", "--file", str(out), "--count", "1M")
    assert checked.exit_code == 0, checked.output
    back = json.loads(_run("time", "--file", str(out), "--count", "1M", "--json").output)
    native = json.loads(_run("time", *args, "--json").output)
    assert back["time_us"] == pytest.approx(native["time_us"], rel=0.01)


def test_export_to_stdout_and_json_format(tmp_path: Path) -> None:
    shown = _run("export", "ring", "all_gather", "--ranks", "3", "--count", "9")
    assert shown.exit_code == 0, shown.output
    assert "<algo " in shown.output
    assert 'coll="allgather"' in shown.output
    xml = tmp_path / "ag.xml"
    xml.write_text(shown.output)
    as_json = _run("export", "--file", str(xml), "--count", "9", "--format", "json")
    assert as_json.exit_code == 0, as_json.output
    assert json.loads(as_json.output)["spec"]["collective"] == "all_gather"


def _bad(text: str) -> str:
    return algo("t", 2, [gpu(0, [tb(0, 1, 1, [text])], i=2, o=2), gpu(1, [], i=2, o=2)])


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("<algo name='x'", "not well-formed XML"),
        (_bad(step(0, "fancy", "i", 0, "o", 0)), "gpu 0 tb 0 step 0: step type 'fancy'"),
        (
            algo("t", 2, [gpu(0, [tb(0, 2, -1, [])], i=2, o=2), gpu(1, [], i=2, o=2)]),
            "gpu 0 tb 0: send=2 is not another gpu (0..1)",
        ),
        (_bad(step(0, "s", "i", 0, "o", 0)), "gpu 0: gpu 0 sends 1 times to gpu 1"),
    ],
)
def test_bad_xml_is_one_line_and_exit_2(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "bad.xml"
    path.write_text(text)
    for command in ("verify", "time", "export"):
        result = _run(command, "--file", str(path))
        assert result.exit_code == 2, result.output
        assert message in result.output
        assert f"{path}: " in result.output
        assert "Traceback" not in result.output
        assert len(result.output.strip().splitlines()) == 1


def test_bad_count_and_mixed_arguments_exit_2(tmp_path: Path) -> None:
    path = tmp_path / "ring.xml"
    path.write_text(ring_all_reduce(4))
    bad_count = _run("verify", "--file", str(path), "--count", "6")
    assert bad_count.exit_code == 2
    assert "multiple of nchunksperloop=4" in bad_count.output
    both = _run("verify", "ring", "all_reduce", "--file", str(path))
    assert both.exit_code == 2
    assert "not both" in both.output
    nvls = _run("export", "nvls", "all_reduce", "--ranks", "4", "--count", "64")
    assert nvls.exit_code == 2
    assert "switch_reduce" in nvls.output
