"""``scaleup bench --explain``: the table, then every size's candidates; ``--json``; refusals."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from scaleup.cli import app

runner = CliRunner()


def _run(*args: str):
    return runner.invoke(app, ["bench", *args])


def test_explain_prints_the_table_then_the_candidates():
    plain = _run("-b", "1M", "-e", "2M")
    result = _run("-b", "1M", "-e", "2M", "--explain")
    assert result.exit_code == 0, result.output
    assert result.output.startswith(plain.output)  # the table is the same
    blocks = result.output.split("# explain dgx-h100: ")[1:]
    assert len(blocks) == 2
    for block in blocks:
        head = block.splitlines()[0]
        assert "chose " in head
        assert "candidates" in head
        marked = [line for line in block.splitlines() if line.lstrip().startswith("*")]
        assert len(marked) == 1
        assert "simulated" in marked[0]
        assert "#   by hand: " in block
        assert "#     ch 0: " in block


def test_explain_json_parses_and_matches_the_table():
    result = _run("-b", "1G", "-e", "1G", "--algo", "ring", "--explain", "--json")
    assert result.exit_code == 0, result.output
    (record,) = json.loads(result.output)
    assert record["label"] == "dgx-h100"
    assert record["algorithm"] == "ring"
    chosen = [c for c in record["candidates"] if c["chosen"]]
    assert len(chosen) == 1
    assert chosen[0]["time_s"] == record["time_s"]
    assert chosen[0]["bound"]["kind"] == "link"
    assert {c["status"] for c in record["candidates"]} <= {"simulated", "pruned", "failed"}
    assert chosen[0]["channel_paths"][0]["kind"] == "ring"


def test_explain_compares_fabrics():
    result = _run("-b", "1M", "-e", "1M", "--topology", "dgx-h100,pcie-8", "--explain", "--json")
    assert result.exit_code == 0, result.output
    assert [r["label"] for r in json.loads(result.output)] == ["dgx-h100", "pcie-8"]


@pytest.mark.parametrize(
    ("args", "flag"),
    [
        (["--runtime", "shm", "-g", "2", "--explain"], "--explain"),
        (["--explain", "--csv"], "--csv"),
    ],
)
def test_bad_combinations_exit_2_with_one_line(args, flag):
    result = _run(*args)
    assert result.exit_code == 2, result.output
    assert result.output.startswith(f"error: {flag}:"), result.output
    assert len(result.output.strip().splitlines()) == 1


def test_explain_shows_the_lp_lower_bound_per_size():
    """dgx-h100, 1 GiB all_reduce: S / 370.8 GB/s = 2895.74 us (docs/models.md §18), in the text
    and as ``lp_bound`` in ``--json``."""
    text = _run("-b", "1G", "-e", "1G", "--explain")
    assert text.exit_code == 0, text.output
    (line,) = [ln for ln in text.output.splitlines() if ln.startswith("#   LP lower bound")]
    assert "terminal flow, switches reduce in-network" in line
    assert "2895.74 us" in line
    assert "busbw 648.9 GB/s" in line
    result = _run("-b", "1G", "-e", "1G", "--explain", "--json")
    assert result.exit_code == 0, result.output
    (record,) = json.loads(result.output)
    lp = record["lp_bound"]
    assert lp["time_s"] * 1e6 == pytest.approx(2895.74, abs=0.01)
    assert lp["time_over_bound"] == pytest.approx(record["time_s"] / lp["time_s"])
    assert 0 < lp["efficiency"] <= 1
    assert lp["in_network_reduction"] is True
