"""``scaleup bench`` honours NCCL's environment; flags take precedence; default output unchanged."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from scaleup.cli import app

runner = CliRunner()
_SMALL = ["bench", "-b", "1M", "-e", "4M"]


def _rows(output: str) -> list[list[str]]:
    return [line.split() for line in output.splitlines() if line.strip() and line[0] != "#"]


def test_no_variable_adds_no_header_line():
    result = runner.invoke(app, _SMALL)
    assert result.exit_code == 0, result.output
    assert "NCCL" not in result.output


def test_nccl_algo_and_proto_narrow_the_tuner_and_are_named():
    result = runner.invoke(app, _SMALL, env={"NCCL_ALGO": "Ring,PAT", "NCCL_PROTO": "^simple"})
    assert result.exit_code == 0, result.output
    assert "# NCCL environment applied: NCCL_ALGO=Ring,PAT NCCL_PROTO=^simple" in result.output
    for row in _rows(result.output):
        assert row[-3] == "ring"
        assert row[-2] in ("ll", "ll128")


def test_header_note_leaves_the_rows_alone():
    plain = runner.invoke(app, _SMALL)
    noted = runner.invoke(app, _SMALL, env={"NCCL_MAX_NCHANNELS": "64"})
    assert _rows(plain.output) == _rows(noted.output)
    assert "NCCL_MAX_NCHANNELS=64" in noted.output


def test_channel_range_clamps():
    result = runner.invoke(app, _SMALL, env={"NCCL_MIN_NCHANNELS": "3", "NCCL_MAX_NCHANNELS": "3"})
    assert result.exit_code == 0, result.output
    assert {row[-1] for row in _rows(result.output)} == {"3"}


def test_nvls_enable_zero():
    result = runner.invoke(app, _SMALL, env={"NCCL_NVLS_ENABLE": "0"})
    assert result.exit_code == 0, result.output
    assert all(row[-3] not in ("nvls", "nvls_tree") for row in _rows(result.output))


def test_flags_take_precedence_and_are_said_to():
    result = runner.invoke(
        app,
        [*_SMALL, "--algo", "ring", "--proto", "simple"],
        env={"NCCL_ALGO": "tree", "NCCL_PROTO": "LL"},
    )
    assert result.exit_code == 0, result.output
    assert "overridden by flags: NCCL_ALGO (--algo), NCCL_PROTO (--proto)" in result.output
    assert {(row[-3], row[-2]) for row in _rows(result.output)} == {("ring", "simple")}


def test_json_and_csv_record_the_variables():
    result = runner.invoke(app, [*_SMALL, "--json"], env={"NCCL_ALGO": "ring"})
    assert result.exit_code == 0, result.output
    rows = json.loads(result.output)
    assert all(r["nccl_env"] == {"NCCL_ALGO": "ring"} and r["algo"] == "ring" for r in rows)
    csv_out = runner.invoke(app, [*_SMALL, "--csv"], env={"NCCL_ALGO": "ring"}).output
    assert csv_out.splitlines()[0].endswith(",nccl_env")
    plain = json.loads(runner.invoke(app, [*_SMALL, "--json"]).output)
    assert "nccl_env" not in plain[0]


@pytest.mark.parametrize(
    ("env", "var"),
    [
        ({"NCCL_ALGO": "bogus"}, "NCCL_ALGO"),
        ({"NCCL_ALGO": "CollnetDirect"}, "NCCL_ALGO"),
        ({"NCCL_ALGO": "NVLSTree"}, "NCCL_ALGO"),  # one server: the tuner has no nvls_tree
        ({"NCCL_PROTO": "fast"}, "NCCL_PROTO"),
        ({"NCCL_MAX_NCHANNELS": "-1"}, "NCCL_MAX_NCHANNELS"),
        ({"NCCL_NVLS_ENABLE": "maybe"}, "NCCL_NVLS_ENABLE"),
        ({"NCCL_LL128_C2C": "on"}, "NCCL_LL128_C2C"),
    ],
)
def test_bad_value_is_one_line_naming_the_variable(env, var):
    result = runner.invoke(app, _SMALL, env=env)
    assert result.exit_code == 2
    lines = result.output.strip().splitlines()
    assert len(lines) == 1
    assert lines[0].startswith(f"error: {var}:")
    assert "Traceback" not in result.output


def test_runtime_ignores_nccl_variables():
    from scaleup.cli.bench import BenchFlags, nccl_env_of

    flags = BenchFlags("8", "8", 2.0, "all_reduce", "float32", "sum", 0, 2, None, None, None,
                       None, False, None, "shm", None, None,
                       environ={"NCCL_ALGO": "bogus"})  # fmt: skip
    assert nccl_env_of(flags)[0].applied == {}
