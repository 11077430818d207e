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
    spec = {"collective": "all_reduce", "nranks": 2, "count": 1}
    return json.dumps({"spec": spec, "ops": [body]})


_RING = "schedule verify ring all_reduce -n 4 -c 16"
_PLAN = "plan --model llama-3-8b -t h100-nvl-pair"
_FILE_PLAN = "plan --model m -t h100-nvl-pair --model-file"

#: (command line, with @name for a file of _FILES; what the one line must say)
CASES = [
    # item 6: small inputs that took the machine
    ("bench -b 8 -e 8 --channels 1000000", "--channels: 1000000 is more than the limit of 64"),
    ("schedule verify --file @nranks", "spec.nranks: Input should be less than or equal"),
    (f"{_RING} --chunks 10000000", "--chunks: 10000000 is more than the limit of 1024"),
    ("topo show ualink-pod:planes=100000", "ualink-pod: planes: 100128 devices is more than"),
    ("topo show 99999xdgx-h100", "99999xdgx-h100: n: 799992 accelerators is more than the limit"),
    # item 7: a traceback and exit 1 before
    ("bench -b 8 -e 8 -f inf", "-f: factor must be a finite number > 1, got inf"),
    ("bench -b " + "9" * 400, "-b: a size of 400 digits is more than the limit"),
    (f"{_RING} --seed -1", "--seed: the seed must be >= 0, got -1"),
    ("schedule verify --file @offset", "ops[0].srcs[0][2]: Input should be less than"),
    ("schedule verify --file @rank", "ops[0].rank: Input should be less than 16384"),
    ("schedule verify --file @channel", "ops[0].channel: Input should be less than"),
    ("schedule verify --file @deep", "JSON nested too deeply"),
    ("schedule verify ring all_reduce -n 4 -c 1T", "--count: the replay would need about"),
    ("topo show ualink-pod:planes=0", "ualink-pod: planes: planes must be a positive integer"),
    ("topo show @bandwidth", "links[0]: 1e+300 GB/s (bandwidth_gb_per_s) is more than the limit"),
    ("topo show " + "x" * 300, "NAME|FILE: 300 characters in the preset name is more than"),
    # found by the fuzz tests
    (f"{_PLAN} --tp 0", "--tp: must be >= 1, got 0"),
    (f"{_PLAN} --seq {10**400}", "--seq: ~10^400 is more than the limit"),
    (f"{_FILE_PLAN} @layers", "models.m: layers: Input should be less than or equal"),
    (f"{_FILE_PLAN} @deep_model", "not valid TOML: nested too deeply"),
    ("topo show @deep_topology", "not valid TOML: nested too deeply"),
]

_DEEP = "[" * 5000 + "]" * 5000
_FILES = {
    # a few bytes that used to never finish
    "@nranks": (
        "nranks.json",
        '{"spec":{"collective":"all_reduce","nranks":1099511627776,"count":1},"ops":[]}',
    ),
    "@offset": ("offset.json", _schedule_json(srcs=[[0, "input", 2**63]])),
    "@rank": ("rank.json", _schedule_json(rank=2**31)),
    "@channel": ("channel.json", _schedule_json(channel=2**31)),
    "@deep": ("deep.json", '{"spec": ' + "[" * 100_000 + "]" * 100_000 + "}"),
    "@bandwidth": ("bw.toml", _TWO_GPUS + "bandwidth_gb_per_s = 1e300\n"),
    "@layers": ("layers.toml", _MODEL.replace("layers = 2", f"layers = {10**400}")),
    "@deep_model": ("deep_model.toml", _MODEL + f"x = {_DEEP}\n"),
    "@deep_topology": ("deep.toml", _TWO_GPUS.replace('name = "two-h100"', f"name = {_DEEP}")),
}


@pytest.mark.parametrize(("command", "expected"), CASES, ids=[c[:40] for c, _ in CASES])
def test_bad_input_is_one_line_exit_2(command: str, expected: str) -> None:
    args = [str(write_input(*_FILES[a])) if a in _FILES else a for a in command.split()]
    result = run_cli(args)
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert result.exit_code == 2, result.output
    assert len(lines) == 1, result.output
    assert lines[0].startswith("error: ")
    assert expected in lines[0], lines[0]
