"""The bad inputs of issue 10 (items 6 and 7), written down: each ends in one line naming the
flag, file or entry and the rule, exit code 2, within 10 s and 1 GiB (under
:func:`fuzz_support.bounded`, so the inputs that used to take the machine fail fast instead).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from fuzz_support import run_cli, write_input

#: The example topology; its last table is its one link.
_TWO_GPUS = (Path(__file__).resolve().parents[2] / "examples" / "two-h100.toml").read_text()
_MODEL = "[models.m]\nlayers = 2\nhidden = 64\nheads = 4\nffn = 64\nvocab = 100\n"


def _schedule_json(**op: object) -> str:
    base = {"id": 0, "kind": "copy", "rank": 0, "count": 1, "srcs": [[0, "input", 0]]}
    body = {**base, "dsts": [[1, "output", 0]], **op}
    return json.dumps({"spec": {"collective": "all_reduce", "nranks": 2, "count": 1}, "ops": [body]})


def _file(name: str, text: str) -> str:
    return str(write_input(name, text))


CASES = {
    # item 6: small inputs that took the machine
    "bench --channels 1000000": (["bench", "-b", "8", "-e", "8", "--channels", "1000000"], "--channels: 1000000 is more than the limit of 64"),
    "schedule nranks 2**40": (["schedule", "verify", "--file", "@nranks"], "spec.nranks"),
    "schedule --chunks 10000000": (["schedule", "verify", "ring", "all_reduce", "-n", "4", "-c", "16", "--chunks", "10000000"], "--chunks: 10000000 is more than the limit of 1024"),
    "ualink-pod:planes=100000": (["topo", "show", "ualink-pod:planes=100000"], "ualink-pod: planes: "),
    "99999xdgx-h100": (["topo", "show", "99999xdgx-h100"], "99999xdgx-h100: n: 799992 accelerators is more than the limit"),
    # item 7: a traceback and exit 1 before
    "bench -f inf": (["bench", "-b", "8", "-e", "8", "-f", "inf"], "-f: "),
    "bench -b 400 digits": (["bench", "-b", "9" * 400], "-b: a size of 400 digits is more than the limit"),
    "--seed -1": (["schedule", "verify", "ring", "all_reduce", "-n", "4", "-c", "16", "--seed", "-1"], "--seed: "),
    "offset 2**63": (["schedule", "verify", "--file", "@offset"], "ops[0].srcs[0][2]: "),
    "rank 2**31": (["schedule", "verify", "--file", "@rank"], "ops[0].rank: "),
    "channel tag 2**31": (["schedule", "verify", "--file", "@channel"], "ops[0].channel: "),
    "deep JSON": (["schedule", "verify", "--file", "@deep"], "nested too deeply"),
    "-c 1T": (["schedule", "verify", "ring", "all_reduce", "-n", "4", "-c", "1T"], "--count: the replay would need about"),
    "ualink-pod:planes=0": (["topo", "show", "ualink-pod:planes=0"], "ualink-pod: planes: planes must be a positive integer"),
    "bandwidth 1e300": (["topo", "show", "@bandwidth"], "links[0]: 1e+300 GB/s (bandwidth_gb_per_s) is more than the limit"),
    "300-character name": (["topo", "show", "x" * 300], "300 characters in the preset name is more than the limit of 255"),
    # found by the fuzz tests
    "plan --tp 0": (["plan", "--model", "llama-3-8b", "-t", "h100-nvl-pair", "--tp", "0"], "--tp: must be >= 1"),
    "plan --seq 10**400": (["plan", "--model", "llama-3-8b", "-t", "h100-nvl-pair", "--seq", str(10**400)], "--seq: ~10^400 is more than the limit"),
    "model layers 10**400": (["plan", "--model", "m", "--model-file", "@layers", "-t", "h100-nvl-pair"], "models.m: layers: "),
    "deep model TOML": (["plan", "--model", "m", "--model-file", "@deep_toml"], "nested too deeply"),
    "deep topology TOML": (["topo", "show", "@deep_topology"], "nested too deeply"),
}  # fmt: skip

_FILES = {
    "@nranks": lambda: _file("nranks.json", '{"spec":{"collective":"all_reduce","nranks":1099511627776,"count":1},"ops":[]}'),
    "@offset": lambda: _file("offset.json", _schedule_json(srcs=[[0, "input", 2**63]])),
    "@rank": lambda: _file("rank.json", _schedule_json(rank=2**31)),
    "@channel": lambda: _file("channel.json", _schedule_json(channel=2**31)),
    "@deep": lambda: _file("deep.json", '{"spec": ' + "[" * 100_000 + "]" * 100_000 + "}"),
    "@bandwidth": lambda: _file("bw.toml", _TWO_GPUS + "bandwidth_gb_per_s = 1e300\n"),
    "@layers": lambda: _file("layers.toml", _MODEL.replace("layers = 2", f"layers = {10**400}")),
    "@deep_toml": lambda: _file("deep_model.toml", _MODEL + "x = " + "[" * 5000 + "]" * 5000 + "\n"),
    "@deep_topology": lambda: _file("deep.toml", _TWO_GPUS.replace('name = "two-h100"', "name = " + "[" * 5000 + "]" * 5000)),
}  # fmt: skip


@pytest.mark.parametrize("case", list(CASES))
def test_bad_input_is_one_line_exit_2(case: str) -> None:
    args, expected = CASES[case]
    args = [_FILES[a]() if a in _FILES else a for a in args]
    result = run_cli(args)
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert result.exit_code == 2, result.output
    assert len(lines) == 1 and lines[0].startswith("error: "), result.output
    assert expected in lines[0], lines[0]
