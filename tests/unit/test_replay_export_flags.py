"""``hermes sessions export`` on 0.22 writes every stored row of a session with its ``active`` /
``compacted`` flags (``export_session(include_inactive=True)``): the rows a compaction replaced,
the copies and summary it wrote back, and rewound rows. Replaying that export must replay the
conversation as replaying the session id from state.db does, not every stored row in a row."""

from __future__ import annotations

import json
import sqlite3

from test_cli import LOCAL, _compacted_state_db, home, report_of, run_cli  # noqa: F401 (fixture)


def _export_as_hermes_0_22(db, sid, out) -> int:
    """What 0.22's ``sessions export`` writes for ``sid``: the session row plus every message
    row (``SELECT *``, storage order) as a dict, one session per line."""
    conn = sqlite3.connect(str(db))
    conn.row_factory = sqlite3.Row
    session = dict(conn.execute("SELECT * FROM sessions WHERE id=?", (sid,)).fetchone())
    rows = [dict(r) for r in conn.execute("SELECT * FROM messages WHERE session_id=? ORDER BY id",
                                          (sid,))]
    conn.close()
    for r in rows:
        if r["tool_calls"]:
            r["tool_calls"] = json.loads(r["tool_calls"])
    out.write_text(json.dumps(dict(session, messages=rows)) + "\n", encoding="utf-8")
    return len(rows)


def test_a_0_22_export_replays_as_its_session_id(home, tmp_path):
    sid, _msgs = _compacted_state_db(home / "state.db")
    export = tmp_path / "export.jsonl"
    stored = _export_as_hermes_0_22(home / "state.db", sid, export)
    by_id = report_of(run_cli("replay", sid, "--context-length", "64000", "--json",
                              home=home, env=LOCAL))
    by_export = report_of(run_cli("replay", str(export), "--context-length", "64000", "--json",
                                  home=home, env=LOCAL))
    assert by_id["summary"]["messages_read"] < stored
    for key in ("messages_read", "requests", "invalid_requests", "tool_results", "compactions"):
        assert by_export["summary"][key] == by_id["summary"][key], key
    assert by_export["summary"]["invalid_requests"] == 0
    assert by_export["source"]["not_reconstructed"] == by_id["source"]["not_reconstructed"]
    assert by_export["source"]["live_compactions"] == by_id["source"]["live_compactions"] == 1
    assert by_export["source"]["inactive_rows_skipped"] == 1      # the rewound row


def test_an_export_without_flags_is_replayed_as_written(home, tmp_path):
    msgs = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}] * 2
    export = tmp_path / "plain.json"
    export.write_text(json.dumps({"id": "s1", "messages": msgs}), encoding="utf-8")
    rep = report_of(run_cli("replay", str(export), "--context-length", "64000", "--json",
                            home=home, env=LOCAL))
    assert rep["summary"]["messages_read"] == 4
    assert "not_reconstructed" not in rep["source"]
