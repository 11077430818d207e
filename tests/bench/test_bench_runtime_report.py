"""bench/bench_runtime.py's report: loads side by side, "not installed" cells, size parsing."""

from __future__ import annotations

import bench_runtime as br


def test_sizes_parse() -> None:
    sizes = [br._parse_size(t) for t in ("4K", "4KiB", "64M", "1G", "512")]
    assert sizes == [4096, 4096, 64 << 20, 1 << 30, 512]


def test_missing_libraries_get_a_cell_not_a_dropped_column() -> None:
    sizes = [4 << 10, 64 << 20]
    by_load: dict[str, dict[str, br.Times]] = {
        load: {
            "shm": [20e-6, 0.02],
            "pipe": [300e-6, 0.3],
            "mpi": [10e-6, 0.05] if load == "idle" else "failed",
            "gloo": br.NOT_INSTALLED,
        }
        for load in br.LOADS
    }
    text = br.report(2, sizes, by_load, dict.fromkeys(br.LOADS, "1 1 1"), 10e9, 12e9, "cmd")
    side = text[text.index("Side by side") :].splitlines()
    assert side[2] == (
        "| size | shm idle | shm busy | pipe idle | pipe busy | mpi idle | mpi busy | "
        "gloo idle | gloo busy |"
    )
    assert side[4] == (
        "| 4 KiB | 20.0 | 20.0 | 300.0 | 300.0 | 10.0 | failed | not installed | not installed |"
    )
    assert "- idle: gloo: not installed" in text
    assert "- busy: mpi: failed" in text
