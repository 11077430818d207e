"""Cheap, deterministic point kinds for the sweep tests (pickled by reference to the workers)."""

from __future__ import annotations

import math
import os
import time
from typing import Any

#: Environment variable naming the file :func:`counted` appends each evaluated ``x`` to.
COUNTER_ENV = "SCALEUP_TEST_COUNTER"


def square(point: dict[str, Any]) -> dict[str, Any]:
    """``y = x * x`` and a label: a point that costs nothing."""
    return {"y": point["x"] * point["x"], "label": f"x{point['x']}"}


def failing(point: dict[str, Any]) -> dict[str, Any]:
    """:func:`square`, except that ``x == 3`` raises."""
    if point["x"] == 3:
        raise ValueError("x = 3 is not allowed here")
    return square(point)


def fake_bench(point: dict[str, Any]) -> dict[str, Any]:
    """A BenchRow-shaped result from a closed form: latency + bytes / bandwidth per topology."""
    nbytes = int(point["bytes"])
    peak = {"dgx-h100": 360.0, "mi300x-8": 300.0}.get(point["topology"], 100.0)
    time_s = 5e-6 + nbytes / (peak * 1e9)
    algo = (
        point["algo"]
        if point.get("algo", "tuned") != "tuned"
        else ("ring" if nbytes >= 65536 else "tree")
    )
    proto = (
        point["proto"]
        if point.get("proto", "tuned") != "tuned"
        else ("simple" if nbytes >= 65536 else "ll")
    )
    algbw = nbytes / time_s / 1e9
    return {
        "topology_name": point["topology"],
        "collective": point["collective"],
        "bytes": nbytes,
        "count": nbytes // 4,
        "dtype": point.get("dtype", "float32"),
        "time_us": time_s * 1e6,
        "algbw_gb_per_s": algbw,
        "busbw_gb_per_s": algbw * 1.75,
        "linkbw_gb_per_s": None,
        "algo": algo,
        "proto": proto,
        "channels": 8,
        "nranks": 8,
    }


def fake_plan(point: dict[str, Any]) -> dict[str, Any]:
    """A PlanResult-shaped result: memory falls with tp, step time has a sweet spot."""
    tp = int(point.get("tp", 1))
    pp = int(point.get("pp", 1))
    fraction = 2.4 / (tp * pp)
    return {
        "memory": {"per_device_bytes": int(fraction * 80e9), "fraction_of_hbm": fraction},
        "fits": fraction <= 1.0,
        "step_time_s": 1.0 / tp + 0.05 * tp + 0.1 * math.log2(pp + 1),
    }


def slow_failing(point: dict[str, Any]) -> dict[str, Any]:
    """:func:`failing` after 20 ms: slow enough that a sweep is still running when interrupted."""
    time.sleep(0.02)
    return failing(point)


def counted(point: dict[str, Any]) -> dict[str, Any]:
    """:func:`failing` after 10 ms, first appending ``x`` to the file named by
    :data:`COUNTER_ENV` (if set): a record of every evaluation, to catch a point computed twice."""
    time.sleep(0.01)
    path = os.environ.get(COUNTER_ENV)
    if path:
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, f"{point['x']}\n".encode())  # one write: whole lines, even if killed
        finally:
            os.close(fd)
    return failing(point)


#: The fakes by kind name: ``bench``/``plan`` stand-ins from a closed form, and test kinds.
FAKES = {
    "square": square,
    "failing": failing,
    "slow_failing": slow_failing,
    "counted": counted,
    "bench": fake_bench,
    "plan": fake_plan,
}
