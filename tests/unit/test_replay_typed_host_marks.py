"""A user turn that starts with Hermes' summary marks ("[CONTEXT SUMMARY] of our meeting: …")
in a session that never compacted: ``replay`` from state.db skipped it as a compaction summary
and said "the live session compacted once". Hermes writes its summary after the rows a
compaction replaced (0.19+) or at the start of a session that continues another (0.17); before
either, such text is the user's and is replayed."""

from __future__ import annotations

import sqlite3

from test_cli import LOCAL, _compacted_state_db, home, report_of, run_cli  # noqa: F401 (fixture)

TYPED = "[CONTEXT SUMMARY] of our meeting: ship on Friday. Thoughts?"


def _state_db(path, sid: str) -> None:
    conn = sqlite3.connect(str(path))
    conn.execute("CREATE TABLE sessions (id TEXT PRIMARY KEY, source TEXT, system_prompt TEXT, "
                 "parent_session_id TEXT)")
    conn.execute("CREATE TABLE messages (id INTEGER PRIMARY KEY AUTOINCREMENT, session_id TEXT, "
                 "role TEXT, content TEXT, tool_call_id TEXT, tool_calls TEXT, tool_name TEXT, "
                 "timestamp REAL, active INTEGER NOT NULL DEFAULT 1, "
                 "compacted INTEGER NOT NULL DEFAULT 0)")
    conn.execute("INSERT INTO sessions VALUES (?, 'cli', 'sys', NULL)", (sid,))
    for i, (role, text) in enumerate([("user", "hello"), ("assistant", "hi"), ("user", TYPED),
                                      ("assistant", "looks good"), ("user", "thanks"),
                                      ("assistant", "bye")]):
        conn.execute("INSERT INTO messages(session_id, role, content, timestamp) VALUES (?,?,?,?)",
                     (sid, role, text, 1000.0 + i))
    conn.commit()
    conn.close()


def test_a_typed_mark_in_a_session_that_never_compacted_is_replayed(home):
    _state_db(home / "state.db", "20261206_000000_aaaaaa")
    rep = report_of(run_cli("replay", "20261206_000000_aaaaaa", "--context-length", "64000",
                            "--json", home=home, env=LOCAL))
    assert rep["summary"]["messages_read"] == 6
    assert rep["source"]["live_compactions"] == 0
    assert not any("summar" in g for g in rep["source"]["not_reconstructed"])


def test_hermes_summary_after_a_compaction_is_still_skipped(home):
    sid, _msgs = _compacted_state_db(home / "state.db")
    rep = report_of(run_cli("replay", sid, "--context-length", "64000", "--json",
                            home=home, env=LOCAL))
    assert any("1 compaction summary" in g for g in rep["source"]["not_reconstructed"])
    assert rep["source"]["live_compactions"] == 1
