"""A batch of sweep points shares one tuning session; kinds without a session still work."""

from __future__ import annotations

from typing import Any

from sweep_fake_kinds import square

from scaleup.sweep.evaluate import evaluate_batch, evaluate_point
from scaleup.tune import TuneSession


def session_seen(point: dict[str, Any], session: TuneSession | None = None) -> dict[str, Any]:
    """Which session the point was evaluated in (a kind that takes one)."""
    return {"session": None if session is None else id(session)}


KINDS = {"seen": session_seen, "plain": square}


def test_one_session_per_batch():
    rows = evaluate_batch([{"kind": "seen", "x": i} for i in range(3)], KINDS)
    sessions = {row["session"] for row in rows}
    assert len(sessions) == 1
    assert None not in sessions


def test_kinds_without_a_session_and_points_without_a_batch():
    rows = evaluate_batch([{"kind": "plain", "x": 3}], KINDS)
    assert rows[0]["y"] == 9
    assert evaluate_point({"kind": "seen", "x": 1}, KINDS)["session"] is None


def test_bench_points_of_a_batch_reuse_checked_structures():
    """The second size of one fabric and collective checks nothing new."""
    session = TuneSession()
    point = {"kind": "bench", "topology": "dgx-h100", "collective": "all_gather", "bytes": 1 << 20}
    first = evaluate_point(point, session=session)
    checked = len(session.checked)
    second = evaluate_point({**point, "bytes": 1 << 21}, session=session)
    assert (first["status"], second["status"]) == ("ok", "ok")
    assert len(session.checked) == checked
