"""One compaction reads the same everywhere (issue 19, "Done when"): a real demo run against
the fake Gateway compacts through the real engine; the record it stored is then rendered by
the demo report, the 0.22 start-of-compaction line, the ``/tencentdb-offload`` slash command
and ``status``, and every one shows the same numbers
(tokens before and after, the target, items archived, route and level words) — and shows
them through ``Compaction.describe()``: with ``describe`` wrapped in markers, every surface
carries the markers around exactly the record's description. A ``replay`` of the same session
renders each of its own stored records the same way."""

from __future__ import annotations

import json
import os
import re
import sys
from pathlib import Path

import pytest

from tencentdb_offload import ops
from tencentdb_offload.archive.readonly import StoreReader
from tencentdb_offload.host.command import make_command
from tencentdb_offload.session.record import Compaction, Route
from tencentdb_offload.common.humanize import count
from tencentdb_offload.ops import demo, driver

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.append(str(ROOT))

from tests.fakes.gateway import FakeGateway  # noqa: E402

TURNS = "10"
OPEN, CLOSE = "\u27e6", "\u27e7"        # ⟦ ⟧ around every describe() a surface prints


@pytest.fixture
def clean_env(tmp_path, monkeypatch):
    for k in list(os.environ):
        if k.startswith(("TENCENTDB_OFFLOAD_", "HERMES_")):
            monkeypatch.delenv(k)
    monkeypatch.setenv("HERMES_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("TENCENTDB_OFFLOAD_API_KEY", "k")
    real = Compaction.describe
    monkeypatch.setattr(Compaction, "describe", lambda self: OPEN + real(self) + CLOSE)
    return real


def watch_the_engine(monkeypatch, seen):
    """After each compaction of the demo, what the 0.22 line and the slash command say (the
    real engine hook and the real command handler, on the demo's live runtime)."""
    original = driver.Driver._compress

    def compress(self, tokens, trigger):
        original(self, tokens, trigger)
        seen.append({
            "line": self.engine.get_automatic_compaction_status_message(
                phase="start", approx_tokens=123_456, default_message=""),
            "slash": make_command(self.rt)("status")})
    monkeypatch.setattr(driver.Driver, "_compress", compress)
    return original


def stored(store: Path):
    reader = StoreReader(store)
    try:
        return [Compaction.from_json(ev) for ev in reader.events("compaction", limit=1000)]
    finally:
        reader.close()


def marked(text: str):
    return re.findall(re.escape(OPEN) + "(.*?)" + re.escape(CLOSE), text)


def numbers(rec: Compaction):
    return [count(rec.tokens_before), count(rec.tokens_after), count(rec.target),
            "%d item" % rec.archived, rec.level.value if rec.route.via_gateway else "locally"]


def flat(session):
    out = []
    for user, steps in session:
        out.append(user)
        for assistant, results in steps:
            out += [assistant] + results
    return out


def test_one_record_reads_the_same_on_every_surface(tmp_path, clean_env, monkeypatch, capsys):
    real_describe = clean_env
    seen = []
    original = watch_the_engine(monkeypatch, seen)
    session_file = tmp_path / "session.json"
    session_file.write_text(json.dumps(flat(demo.synthetic_session(int(TURNS), 7))))
    with FakeGateway(api_key="k") as gw:
        tuning = ["--gateway", gw.url, "--context-length", "64000"]
        assert ops.main(["demo", "--turns", TURNS, "--store", str(tmp_path / "d")] + tuning) == 0
        demo_text = capsys.readouterr().out
        monkeypatch.setattr(driver.Driver, "_compress", original)     # the demo's view stays
        assert ops.main(["replay", str(session_file), "--store", str(tmp_path / "r")] + tuning) == 0
        replay_text = capsys.readouterr().out
    assert ops.main(["status", "--store", str(tmp_path / "d")]) == 0
    status_text = capsys.readouterr().out

    records = stored(tmp_path / "d")[::-1]               # oldest first, as the demo ran
    assert len(records) >= 2 and any(r.route is not Route.LOCAL for r in records), records
    last = records[-1]
    one = real_describe(last)
    for word in numbers(last):
        assert word in one
    # the demo report: every compaction, in order, exactly as recorded
    assert marked(demo_text) == [real_describe(r) for r in records]
    # replay of the same session: each of its compactions exactly as its store recorded it
    # (the same session, not the same numbers: replay's own calibration and session ids)
    replayed = stored(tmp_path / "r")[::-1]
    assert len(replayed) >= 2 and marked(replay_text) == [real_describe(r) for r in replayed]
    # the 0.22 line and the slash command, live after the last compaction
    assert len(seen) >= len(records)
    assert marked(seen[-1]["line"]) == [one], seen[-1]["line"]
    assert "Last: " + OPEN + one + CLOSE in seen[-1]["line"]
    assert marked(seen[-1]["slash"])[0] == one     # then the recent ones, as status lists them
    assert "last compaction: " in seen[-1]["slash"]
    # status: the last compaction first, then the recent ones newest first
    shown = marked(status_text)
    assert shown[0] == one and shown[1:] == [real_describe(r) for r in records[::-1]][:len(shown) - 1]
