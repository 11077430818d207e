"""``scaleup compare`` in-process (typer's CliRunner): one column per fabric, busbw equal to
``scaleup bench --json``'s, JSON/CSV that parse, a self-contained HTML page, one-line errors."""

from __future__ import annotations

import base64
import csv
import io
import json
import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from scaleup.cli import app

runner = CliRunner()

FABRICS = ("dgx-h100", "mi300x-8", "pcie-8")
COLLECTIVES = ("all_reduce", "all_gather", "all_to_all")
SIZE = "1M"


def _run(*args: str):
    return runner.invoke(app, ["compare", *args])


def _cells(line: str, sep: str) -> list[str]:
    return [c.strip() for c in line.strip().strip(sep).split(sep)]


@pytest.fixture(scope="module")
def table() -> dict[str, list[str]]:
    """The printed table of the three fabrics at one size, ``{row name: cells}`` with the header
    at ``""`` (about 5 s: the tests using it are slow)."""
    result = _run(*FABRICS, "--sizes", SIZE)
    assert result.exit_code == 0, result.output
    rows: dict[str, list[str]] = {}
    for line in result.output.splitlines():
        if line.startswith("┃"):
            rows[""] = _cells(line, "┃")[1:]
        elif line.startswith("│"):
            name, *cells = _cells(line, "│")
            rows[name] = cells
    return rows


def _json_and_html(page: Path | None) -> tuple[list[dict], str]:
    """``--json`` (and ``--html page``) on two fabrics at two small sizes: records, page."""
    extra = ["--html", str(page)] if page is not None else []
    result = _run("dgx-h100", "pcie-8", "--sizes", "8K,64K", "--json", *extra)
    assert result.exit_code == 0, result.output
    text = page.read_text(encoding="utf-8") if page is not None else ""
    return json.loads(result.output), text


def _bench_busbw(collective: str) -> dict[str, float]:
    """``scaleup bench --json`` busbw of ``collective`` at ``SIZE`` on each fabric."""
    result = runner.invoke(
        app,
        ["bench", "--topology", ",".join(FABRICS), "--collective", collective]
        + ["-b", SIZE, "-e", SIZE, "--json"],
    )
    assert result.exit_code == 0, result.output
    return {row["topology"]: row["busbw_gb_per_s"] for row in json.loads(result.output)}


@pytest.mark.slow
def test_table_has_one_column_per_fabric(table) -> None:
    assert table[""] == list(FABRICS)
    for name in ("accelerators (domain)", "pooled HBM GB", "bisection GB/s"):
        assert len(table[name]) == len(FABRICS)
    assert table["accelerators (domain)"][0] == "8 x H100 (8)"
    assert table["pooled HBM GB"] == ["640", "1,649", "640"]


@pytest.mark.slow
@pytest.mark.parametrize("collective", COLLECTIVES)
def test_table_busbw_equals_bench_json(table, collective) -> None:
    """A real cross-check: ``bench`` runs its own tuning session for the same fabric and size."""
    bench = _bench_busbw(collective)
    printed = table[f"{collective} busbw {SIZE} GB/s"]
    assert printed == [f"{bench[name]:,.1f}" for name in FABRICS]


@pytest.mark.slow
def test_table_has_the_model_step(table) -> None:
    step = table["llama-3-8b step (TP 8)"]
    assert all(re.fullmatch(r"[\d.,]+ s", cell) for cell in step), step
    share = table["exposed communication share"]
    assert all(re.fullmatch(r"[\d.]+%", cell) for cell in share), share


def test_json_records() -> None:
    records, _ = _json_and_html(None)
    assert [r["label"] for r in records] == ["dgx-h100", "pcie-8"]
    first = records[0]
    assert first["accelerators"] == 8
    assert first["domain_size"] == 8
    assert first["per_accelerator_gb_per_s"] == pytest.approx(450.0)
    assert set(first["busbw_gb_per_s"]) == set(COLLECTIVES)
    assert set(first["busbw_gb_per_s"]["all_reduce"]) == {"8K", "64K"}
    bench_64k = first["bench"]["all_reduce"][1]
    assert bench_64k["bytes"] == 64 << 10
    assert first["busbw_gb_per_s"]["all_reduce"]["64K"] == bench_64k["busbw_gb_per_s"]
    assert first["model"]["tp"] == 8
    assert first["model"]["fits"] is True


@pytest.mark.slow
def test_html_page_structure(tmp_path: Path) -> None:
    """About 5 s: matplotlib draws a figure per collective."""
    _, page = _json_and_html(tmp_path / "compare.html")
    assert re.search(r"<title>scaleup compare: dgx-h100, pcie-8</title>", page)
    header = re.search(r"<table><tr>(.*?)</tr>", page, re.S)
    assert header is not None
    assert re.findall(r"<th>(.*?)</th>", header.group(1)) == ["", "dgx-h100", "pcie-8"]
    images = re.findall(r"<img alt='[^']*' src='data:image/png;base64,([A-Za-z0-9+/=]+)'>", page)
    assert len(images) == len(COLLECTIVES)
    assert all(base64.b64decode(data).startswith(b"\x89PNG") for data in images)
    footer = re.search(r"<footer[^>]*>(.*?)</footer>", page, re.S)
    assert footer is not None
    assert "scaleup 0." in footer.group(1)
    assert "scaleup compare dgx-h100 pcie-8 --sizes 8K,64K" in footer.group(1)
    assert re.search(r"\d{4}-\d\d-\d\d \d\d:\d\d UTC", footer.group(1))


BROWSER = next(
    filter(None, map(shutil.which, ("chromium", "chromium-browser", "google-chrome"))), None
)
WINDOW = (1280, 2000)  # width, height of the screenshot in pixels


def _screenshot(page: Path, out: Path) -> np.ndarray:
    """``page`` as headless Chromium draws it in a ``WINDOW`` viewport: RGB floats in [0, 1].
    A throwaway profile under ``out``'s folder keeps the browser off ``~/.config``."""
    import matplotlib.image

    command = [str(BROWSER), "--headless", "--no-sandbox", "--disable-gpu"]
    command += [f"--user-data-dir={out.parent / 'profile'}", f"--screenshot={out}"]
    command += [f"--window-size={WINDOW[0]},{WINDOW[1]}", page.resolve().as_uri()]
    done = subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    assert out.is_file(), done.stderr[-2000:]
    return matplotlib.image.imread(out)[..., :3]


def _near(rgb: np.ndarray, colour: str) -> np.ndarray:
    """Mask of the pixels within a few levels of ``colour`` (a matplotlib colour)."""
    from matplotlib.colors import to_rgb

    return np.abs(rgb - np.array(to_rgb(colour))).max(axis=2) < 0.06


@pytest.mark.slow
@pytest.mark.skipif(BROWSER is None, reason="no chromium/chromium-browser/google-chrome on PATH")
def test_html_page_renders_in_headless_browser(tmp_path: Path) -> None:
    """About 8 s: the page, then two screenshots. The page's CSS is greys only, so the plot
    lines' colours (matplotlib's first two) show only where the browser decoded the base64 PNGs;
    the same page with its image data cut out is the control that proves it."""
    import matplotlib.pyplot as plt

    page = tmp_path / "compare.html"
    _, text = _json_and_html(page)
    shot = _screenshot(page, tmp_path / "page" / "shot.png")
    assert shot.shape == (WINDOW[1], WINDOW[0], 3)
    assert (shot.min(axis=2) < 0.95).mean() > 0.02  # not a blank page: text, table, plots
    colours = plt.rcParams["axes.prop_cycle"].by_key()["color"][:2]  # dgx-h100, pcie-8
    for colour in colours:
        line = _near(shot, colour)
        assert line.sum() > 500, colour
        rows = np.flatnonzero(line.any(axis=1))
        assert rows[-1] - rows[0] > WINDOW[1] // 3, colour  # in more than one plot

    bare = tmp_path / "bare.html"
    bare.write_text(re.sub(r"base64,[A-Za-z0-9+/=]+", "base64,", text), encoding="utf-8")
    control = _screenshot(bare, tmp_path / "bare" / "shot.png")
    assert all(_near(control, colour).sum() < 50 for colour in colours)


def test_csv_one_row_per_fabric() -> None:
    result = _run("dgx-h100", "pcie-8", "--sizes", "8K", "--csv")
    assert result.exit_code == 0, result.output
    rows = list(csv.DictReader(io.StringIO(result.output)))
    assert [r["label"] for r in rows] == ["dgx-h100", "pcie-8"]
    assert float(rows[0]["busbw_gb_per_s.all_reduce.8K"]) > float(
        rows[1]["busbw_gb_per_s.all_reduce.8K"]
    )
    assert rows[1]["model.fits"] == "True"


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["nope-9"], "no preset named 'nope-9'"),
        (["dgx-h100", "--sizes", "1Q"], "--sizes"),
        (["dgx-h100", "dgx-h100"], "twice"),
        (["dgx-h100", "--tp", "0"], "--tp"),
        (["dgx-h100", "--json", "--csv"], "--json"),
        (["dgx-h100", "--model", "no-such-model"], "unknown model"),
    ],
)
def test_bad_input_exits_2_with_one_line(args, needle) -> None:
    result = _run(*args)
    assert result.exit_code == 2, result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1, result.output
    assert lines[0].startswith("error: ")
    assert needle in lines[0]


def test_unwritable_html_exits_2(tmp_path: Path) -> None:
    result = _run("pcie-8", "--sizes", "64K", "--html", str(tmp_path / "no" / "x.html"))
    assert result.exit_code == 2, result.output
    assert "--html" in result.output


def test_cells_say_does_not_fit_and_cannot_run() -> None:
    """llama-70b does not fit 8 or 2 x 80 GB (TP 8 and TP 2: the TP shows in each cell); TP 3
    does not divide llama-3-8b's 32 heads."""
    result = _run("pcie-8", "h100-nvl-pair", "--sizes", "64K", "--model", "llama-70b")
    assert result.exit_code == 0, result.output
    step = next(line for line in result.output.splitlines() if "llama-3-70b step" in line)
    assert step.count("does not fit") == 2
    assert "(TP 8)" in step
    assert "(TP 2)" in step
    result = _run("pcie-8", "--sizes", "64K", "--tp", "3")
    assert result.exit_code == 0, result.output
    assert "cannot run: tp=3 must divide the 32 attention heads" in result.output
