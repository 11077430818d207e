"""The stored ``scaleup bench`` outputs the golden test compares against (``tests/golden/bench/``).

One JSON file per preset: ``{"<bench args>": <the --json rows>}``, plus ``variants.json`` (flags
other than the topology) and ``*.txt`` (whole text tables). A case is the argument list of one
``scaleup bench`` call. Regenerate only on purpose, after a deliberate model change, and say why
in the commit::

    PYTHONPATH=src python tests/bench/golden_cases.py            # every file
    PYTHONPATH=src python tests/bench/golden_cases.py dgx-h100   # one preset

Each case runs in a fresh process here, so the stored figures do not depend on what else one
process simulated before; the test runs them all in one process, which checks that too. The
stored figures are the per-flow reference (``--exact``); the test runs the default path (flow
classes, ``scaleup.sim.symmetry``), so it also compares the two on every preset's full sweep.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

GOLDEN_DIR = Path(__file__).resolve().parents[1] / "golden" / "bench"

#: Every registered preset plus two multi-node ones.
PRESETS = (
    "pcie-8",
    "dgx1-p100",
    "dgx1-v100",
    "dgx2",
    "dgx-a100",
    "dgx-h100",
    "dgx-h200",
    "hgx-b200",
    "gb200-nvl72",
    "mi300x-8",
    "mi250x-8",
    "ualink-pod",
    "h100-nvl-pair",
    "2xdgx-h100",
    "2xmi300x-8",
)
#: Presets whose whole file runs in the default suite (the rest is ``-m slow``): one of each
#: kind of fabric that is quick to simulate (PCIe, NVSwitch, full mesh, bridge pair, two nodes).
QUICK = ("pcie-8", "dgx-h100", "mi300x-8", "h100-nvl-pair", "2xdgx-h100")
#: The other collectives, at 1 KiB, 1 MiB and 1 GiB.
OTHER_OPS = ("all_gather", "reduce_scatter", "broadcast", "all_to_all")


def preset_cases(preset: str) -> list[list[str]]:
    """The default sweep (all_reduce, 8 B .. 8 GiB) and the other collectives at three sizes."""
    cases = [["--topology", preset, "--json"]]
    for op in OTHER_OPS:
        cases.append(
            ["--topology", preset, "--op", op, "-b", "1K", "-e", "1G", "-f", "1024", "--json"]
        )
    return cases


#: Flags other than the topology, on dgx-h100 unless they name another.
VARIANT_CASES: tuple[tuple[str, ...], ...] = (
    ("--op", "reduce", "-o", "max", "-r", "3", "-b", "1K", "-e", "1G", "-f", "1024", "--json"),
    ("--op", "broadcast", "-r", "5", "-b", "1K", "-e", "1G", "-f", "1024", "--json"),
    ("--op", "send_recv", "-b", "1K", "-e", "1G", "-f", "1024", "--json"),
    ("--ranks", "4", "-b", "8", "-e", "1G", "-f", "16", "--json"),
    ("--ranks", "3", "--op", "all_gather", "-b", "1K", "-e", "1G", "-f", "32", "--json"),
    ("--no-p2p", "-b", "1K", "-e", "1G", "-f", "32", "--json"),
    ("--tuner", "all", "-b", "8", "-e", "1G", "-f", "8", "--json"),
    (
        "--algo",
        "ring",
        "--proto",
        "ll128",
        "--channels",
        "4",
        *("-b", "1K", "-e", "1G", "-f", "32"),
        "--json",
    ),
    ("--algo", "tree", "-b", "1K", "-e", "1G", "-f", "32", "--json"),
    ("-d", "float16", "-b", "8", "-e", "1G", "-f", "16", "--json"),
    ("-d", "float64", "--op", "reduce_scatter", "-b", "8", "-e", "1G", "-f", "16", "--json"),
    ("--topology", "dgx-h100,mi300x-8", "-b", "1K", "-e", "1G", "-f", "32", "--json"),
    ("--topology", "ualink-pod:n=16", "-b", "8", "-e", "1G", "-f", "8", "--json"),
    (
        "--topology",
        "pcie-8",
        "--ranks",
        "4",
        "--no-p2p",
        *("-b", "1K", "-e", "1G", "-f", "32"),
        "--json",
    ),
)

#: Whole text tables (header, columns, footer): file name -> args.
TEXT_CASES: dict[str, tuple[str, ...]] = {
    "dgx-h100.txt": (),
    "compare.txt": ("--topology", "dgx-h100,pcie-8,mi300x-8", "-b", "1K", "-e", "1G", "-f", "32"),
    "reduce.txt": ("--op", "reduce", "-o", "min", "-r", "2", "-b", "8", "-e", "1G", "-f", "64"),
}


def case_key(args: list[str] | tuple[str, ...]) -> str:
    """The key of a case in its file: its arguments joined by spaces."""
    return " ".join(args)


def preset_file(preset: str) -> Path:
    """Where the cases of one preset are stored."""
    return GOLDEN_DIR / f"{preset}.json"


def _bench(args: list[str] | tuple[str, ...]) -> str:
    """stdout of ``scaleup bench ARGS --exact`` (the per-flow reference) in a fresh interpreter."""
    code = "import sys; from scaleup.cli import app; app(['bench', *sys.argv[1:]])"
    proc = subprocess.run(
        [sys.executable, "-c", code, *args, "--exact"],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "COLUMNS": "200"},
    )
    return proc.stdout


def regenerate(presets: list[str]) -> None:
    """Write the golden files of ``presets`` (all of them, variants and text when empty)."""
    GOLDEN_DIR.mkdir(parents=True, exist_ok=True)
    for preset in presets or PRESETS:
        data = {case_key(a): json.loads(_bench(a)) for a in preset_cases(preset)}
        preset_file(preset).write_text(json.dumps(data, indent=1) + "\n")
        print(f"wrote {preset_file(preset)}")  # noqa: T201 - a developer script
    if presets:
        return
    variants = {case_key(a): json.loads(_bench(a)) for a in VARIANT_CASES}
    (GOLDEN_DIR / "variants.json").write_text(json.dumps(variants, indent=1) + "\n")
    for name, args in TEXT_CASES.items():
        (GOLDEN_DIR / name).write_text(_bench(args))
    print("wrote variants.json and text tables")  # noqa: T201 - a developer script


if __name__ == "__main__":
    regenerate(sys.argv[1:])
