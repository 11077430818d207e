"""``scaleup sweep`` and ``scaleup report`` through typer's CliRunner (in-process)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from scaleup.cli import app
from scaleup.sweep import read_rows

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
SMALL = str(EXAMPLES / "sweep-small.toml")


@pytest.fixture
def runner() -> CliRunner:
    return CliRunner()


def test_serial_sweep_then_resume_then_report(runner: CliRunner, tmp_path: Path) -> None:
    out = tmp_path / "r.parquet"
    first = runner.invoke(
        app, ["sweep", SMALL, "-o", str(out), "--serial", "--max-points", "5", "--json", "-q"]
    )
    assert first.exit_code == 0, first.output
    summary = json.loads(first.stdout)
    assert (summary["total"], summary["evaluated"], summary["pending"]) == (12, 5, 7)
    again = runner.invoke(app, ["sweep", SMALL, "-o", str(out), "--serial"])
    assert again.exit_code == 2
    assert again.stderr.count("\n") == 1
    assert "--resume" in again.stderr
    resumed = runner.invoke(app, ["sweep", SMALL, "-o", str(out), "--serial", "--resume"])
    assert resumed.exit_code == 0, resumed.output
    assert "5 already done" in resumed.stdout
    rows = read_rows(out)
    assert len(rows) == 12
    assert {r["topology"] for r in rows} == {"dgx-h100", "mi300x-8"}
    report = runner.invoke(app, ["report", str(out), "-o", str(tmp_path / "rep"), "--json"])
    assert report.exit_code == 0, report.output
    written = json.loads(report.stdout)
    assert Path(written["index_html"]).is_file()
    assert Path(written["index_md"]).is_file()


def test_csv_output(runner: CliRunner, tmp_path: Path) -> None:
    out = tmp_path / "r.csv"
    result = runner.invoke(app, ["sweep", SMALL, "-o", str(out), "--serial", "-q"])
    assert result.exit_code == 0, result.output
    assert len(read_rows(out)) == 12


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        (
            "[[bench]]\ntopologies = ['dgx-h100']\ncollectives = ['allreduce']\nsizes = ['1M']\n",
            "bench[0].collectives",
        ),
        (
            "[[bench]]\ntopologies = ['nope']\ncollectives = ['all_reduce']\nsizes = ['1M']\n",
            "no preset named",
        ),
        ("nonsense", "not valid TOML"),
    ],
)
def test_bad_spec_exits_2_with_one_line(
    runner: CliRunner, tmp_path: Path, text: str, needle: str
) -> None:
    assert needle in _refused_spec(runner, tmp_path, text)


def _refused_spec(runner: CliRunner, tmp_path: Path, text: str) -> str:
    """Run a spec that must be refused: exit 2, one line naming the file, nothing written."""
    spec = tmp_path / "bad.toml"
    spec.write_text(text)
    result = runner.invoke(app, ["sweep", str(spec), "-o", str(tmp_path / "r.parquet"), "--serial"])
    assert result.exit_code == 2, result.output
    assert result.stderr.startswith(f"error: {spec}: ")
    assert result.stderr.count("\n") == 1
    assert not (tmp_path / "r.parquet").exists()
    return result.stderr


def test_conflicting_flags_and_missing_results(runner: CliRunner, tmp_path: Path) -> None:
    serial = runner.invoke(
        app, ["sweep", SMALL, "-o", str(tmp_path / "r.parquet"), "--serial", "--workers", "2"]
    )
    assert serial.exit_code == 2
    assert "--serial" in serial.stderr
    missing = runner.invoke(
        app, ["report", str(tmp_path / "none.parquet"), "-o", str(tmp_path / "rep")]
    )
    assert missing.exit_code == 2
    assert "no such results" in missing.stderr


@pytest.mark.slow
def test_default_local_cluster_of_processes(runner: CliRunner, tmp_path: Path) -> None:
    """The default path: a LocalCluster of worker processes, then the same rows as --serial."""
    spec = tmp_path / "cheap.toml"
    spec.write_text(
        (EXAMPLES / "sweep-small.toml").read_text()
        + 'algorithms = ["direct"]\nprotocols = ["simple"]\n'  # cheap points: this test times Dask
    )
    out, ref = tmp_path / "cluster.parquet", tmp_path / "serial.parquet"
    result = runner.invoke(
        app, ["sweep", str(spec), "-o", str(out), "--workers", "2", "--json", "-q"]
    )
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["mode"] == "local cluster"
    assert runner.invoke(app, ["sweep", str(spec), "-o", str(ref), "--serial", "-q"]).exit_code == 0

    def rows(path: Path) -> dict[str, dict[str, object]]:
        return {
            r["point_id"]: {k: v for k, v in r.items() if k != "elapsed_s"} for r in read_rows(path)
        }

    assert rows(out) == rows(ref)


ONE_POINT = (
    '[[bench]]\ntopologies = ["dgx-h100"]\ncollectives = ["all_reduce"]\nsizes = ["1K"]\n'
    'algorithms = ["direct"]\nprotocols = ["simple"]\n'
)


@pytest.fixture(scope="module")
def one_result(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A finished one-point sweep (a real bench point, cheap)."""
    base = tmp_path_factory.mktemp("one")
    (base / "spec.toml").write_text(ONE_POINT)
    out = base / "r.parquet"
    result = CliRunner().invoke(app, ["sweep", str(base / "spec.toml"), "-o", str(out), "--serial"])
    assert result.exit_code == 0, result.output
    return out


def _exit_2_one_line(result: object, starts: str) -> None:
    assert result.exit_code == 2, result.output  # type: ignore[attr-defined]
    assert result.stderr.count("\n") == 1, result.stderr  # type: ignore[attr-defined]
    assert result.stderr.startswith(f"error: {starts}"), result.stderr  # type: ignore[attr-defined]


@pytest.mark.parametrize("where", ["a-file", "/dev/null", "a-file/below"])
def test_report_output_that_is_not_a_writable_directory(
    runner: CliRunner, tmp_path: Path, one_result: Path, where: str
) -> None:
    (tmp_path / "a-file").write_text("keep me")
    out = where if where.startswith("/") else str(tmp_path / where)
    _exit_2_one_line(runner.invoke(app, ["report", str(one_result), "-o", out]), f"{out}: ")
    assert (tmp_path / "a-file").read_text() == "keep me"


def test_report_of_a_folder_without_results(runner: CliRunner, tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    result = runner.invoke(app, ["report", str(tmp_path / "empty"), "-o", str(tmp_path / "rep")])
    _exit_2_one_line(result, f"{tmp_path / 'empty'}: holds no sweep results")


@pytest.mark.parametrize(
    ("text", "entry"),
    [
        (ONE_POINT + "ranks = inf\n", "bench[0].ranks"),
        (ONE_POINT + "ranks = [inf]\n", "bench[0].ranks[0]"),
        ("[[plan]]\nmodels = ['llama-70b']\ntopologies = ['dgx-h100']\ntp = inf\n", "plan[0].tp"),
        ("[[plan]]\nmodels = ['llama-70b']\ntopologies = ['dgx-h100']\ntp = [1, nan]\n", "tp[1]"),
        ("[[plan]]\nmodels = ['x']\ntopologies = ['dgx-h100']\nat = 1979-05-27\n", "plan[0].at"),
        (ONE_POINT.replace('["1K"]', "{ min = 1, max = '1G', factor = inf }"), "factor"),
        (ONE_POINT.replace('["1K"]', "{ min = 1, max = '1T', factor = 1.000001 }"), "sizes"),
        (ONE_POINT.replace('"1K"', "1267650600228229401496703205376"), "bench[0].sizes"),
    ],
)
def test_non_finite_or_non_data_spec_values_are_one_line(
    runner: CliRunner, tmp_path: Path, text: str, entry: str
) -> None:
    assert entry in _refused_spec(runner, tmp_path, text)


def test_stopped_serial_sweep_reports_the_points_saved(runner: CliRunner, tmp_path: Path) -> None:
    """Ctrl-C between two writes: the rows finished so far are saved, and the message says so."""
    from scaleup.sweep import register_kind, unregister_kind

    def stop_at_five(point: dict[str, int]) -> dict[str, int]:
        if point["x"] == 5:
            raise KeyboardInterrupt
        return {"y": point["x"]}

    spec = tmp_path / "s.toml"
    spec.write_text('[[grid]]\nkind = "stop-at-five"\nparams = { x = [0, 1, 2, 3, 4, 5, 6] }\n')
    out = tmp_path / "r.parquet"
    register_kind("stop-at-five", stop_at_five)
    try:
        result = runner.invoke(app, ["sweep", str(spec), "-o", str(out), "--serial"])
    finally:
        unregister_kind("stop-at-five")
    assert result.exit_code == 130
    assert len(read_rows(out)) == 5
    assert "interrupted: 5 of 7 points are saved" in result.stderr


def test_sigterm_while_the_cluster_starts_closes_it(
    runner: CliRunner, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A SIGTERM in the middle of LocalCluster(...) waits for it, then stops the sweep and closes
    the cluster (left half-built, distributed closes it at exit, with a traceback)."""
    import os
    import signal

    distributed = pytest.importorskip("distributed")
    closed: list[str] = []

    class Cluster:
        def __init__(self, **kwargs: object) -> None:
            os.kill(os.getpid(), signal.SIGTERM)  # the handler runs before the next line
            self.started = True

        def close(self) -> None:
            closed.append("cluster")

    class Client:
        def __init__(self, cluster: Cluster, **kwargs: object) -> None:
            assert cluster.started

        def close(self) -> None:
            closed.append("client")

    monkeypatch.setattr(distributed, "LocalCluster", Cluster)
    monkeypatch.setattr(distributed, "Client", Client)
    spec = tmp_path / "s.toml"
    spec.write_text(ONE_POINT)
    result = runner.invoke(app, ["sweep", str(spec), "-o", str(tmp_path / "r.parquet"), "-q"])
    assert result.exit_code == 130, result.output
    assert closed == ["client", "cluster"]
    assert "Traceback" not in result.output
    assert result.stderr.startswith("interrupted: 0 of 1 points are saved")


@pytest.mark.slow
@pytest.mark.parametrize("delay_s", [0.5, 1.5, 2.5, 4.0])
def test_sigterm_at_any_moment_prints_no_traceback(tmp_path: Path, delay_s: float) -> None:
    """A real ``scaleup sweep`` on a local cluster of processes, stopped by SIGTERM after
    ``delay_s``: whatever it was doing (importing, starting the cluster, running), no traceback."""
    import os
    import signal
    import subprocess
    import sys
    import time

    spec = tmp_path / "s.toml"
    spec.write_text(ONE_POINT.replace('["1K"]', '["1K", "2K", "4K", "8K"]'))
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2] / "src")}
    code = "from scaleup.cli import main; main()"
    argv = [sys.executable, "-c", code, "sweep", str(spec), "-o", str(tmp_path / "r.parquet")]
    proc = subprocess.Popen(
        [*argv, "--workers", "2", "-q"], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    time.sleep(delay_s)
    proc.send_signal(signal.SIGTERM)
    _, stderr = proc.communicate(timeout=120)
    assert "Traceback" not in stderr.decode(), stderr.decode()
    assert proc.returncode in (0, 130, -signal.SIGTERM)


def test_spec_name_is_text_not_markup(runner: CliRunner, tmp_path: Path) -> None:
    spec = tmp_path / "s.toml"
    spec.write_text('name = "[/x] [bold"\n' + ONE_POINT)
    result = runner.invoke(app, ["sweep", str(spec), "-o", str(tmp_path / "r.parquet"), "--serial"])
    assert result.exit_code == 0, result.output
    assert "[/x] [bold" in result.stderr


def test_unreachable_scheduler_is_one_line_within_seconds(
    runner: CliRunner, tmp_path: Path
) -> None:
    """``--scheduler tcp://127.0.0.1:1``: one line naming the address, exit 2, no progress bar
    and no traceback, after the connect timeout (seconds), not Dask's 30 s."""
    import time

    from scaleup.sweep.run import CONNECT_TIMEOUT_S

    pytest.importorskip("distributed")
    spec = tmp_path / "s.toml"
    spec.write_text(ONE_POINT)
    start = time.monotonic()
    argv = ["sweep", str(spec), "-o", str(tmp_path / "r.parquet")]
    result = runner.invoke(app, [*argv, "--scheduler", "tcp://127.0.0.1:1"])
    assert time.monotonic() - start < CONNECT_TIMEOUT_S + 10
    assert result.exit_code == 2, result.output
    assert result.stderr.count("\n") == 1, result.stderr
    assert result.stderr.startswith("error: tcp://127.0.0.1:1: cannot connect to the Dask")
