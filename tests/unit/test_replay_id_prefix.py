"""``replay`` takes the start of a session id when it names one session. A start that names
several said "no session 'X' in state.db (see `hermes sessions list`)", as if nothing matched;
it now says which ids it starts and asks for more of the id."""

from __future__ import annotations

import sqlite3

from test_cli import LOCAL, home, one_line_error, report_of, run_cli  # noqa: F401 (fixture)


def _state_db(path, ids):
    conn = sqlite3.connect(str(path))
    conn.execute("CREATE TABLE sessions (id TEXT PRIMARY KEY, source TEXT, system_prompt TEXT)")
    conn.execute("CREATE TABLE messages (id INTEGER PRIMARY KEY AUTOINCREMENT, session_id TEXT, "
                 "role TEXT, content TEXT, tool_call_id TEXT, tool_calls TEXT, tool_name TEXT, "
                 "timestamp REAL, active INTEGER NOT NULL DEFAULT 1)")
    for sid in ids:
        conn.execute("INSERT INTO sessions VALUES (?, 'cli', 'sys')", (sid,))
        for i, role in enumerate(("user", "assistant")):
            conn.execute("INSERT INTO messages(session_id, role, content, timestamp) "
                         "VALUES (?,?,?,?)", (sid, role, "%s %s" % (role, sid), 1000.0 + i))
    conn.commit()
    conn.close()


def test_a_start_of_several_ids_names_them(home):
    _state_db(home / "state.db", ["20261206_021213_7f10f8", "20261206_021243_9eca71",
                                  "20261207_090000_aaaaaa"])
    line = one_line_error(run_cli("replay", "20261206_0212", home=home, env=LOCAL),
                          "20261206_021213_7f10f8", "20261206_021243_9eca71", "more of the id")
    assert "no session" not in line
    rep = report_of(run_cli("replay", "20261206_02124", "--context-length", "64000", "--json",
                            home=home, env=LOCAL))
    assert rep["source"]["session_id"] == "20261206_021243_9eca71"
    one_line_error(run_cli("replay", "20991231", home=home, env=LOCAL), "no session")
