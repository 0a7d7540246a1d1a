"""A state.db in rollback-journal mode (Hermes 0.22 keeps it so on a SQLite with the WAL-reset
bug): the read-only opener must honour the writer's lock and a journal a killed writer left,
never read the pages of a write that did not commit (``immutable=1`` did both)."""

from __future__ import annotations

import sqlite3
import subprocess
import sys

import pytest

from test_cli import LOCAL, one_line_error, run_cli

from tencentdb_offload.archive.readonly import connect

SID = "20260101_000000_abcdef"


# run here and in a child killed mid-write, so plain source
_BUILD = '''
import sqlite3
SID = "20260101_000000_abcdef"


def _state_db(path):
    conn = sqlite3.connect(str(path), isolation_level=None)
    conn.execute("PRAGMA journal_mode=DELETE")
    conn.execute("CREATE TABLE sessions (id TEXT PRIMARY KEY, source TEXT, system_prompt TEXT)")
    conn.execute("CREATE TABLE messages (id INTEGER PRIMARY KEY AUTOINCREMENT, session_id TEXT, "
                 "role TEXT, content TEXT, tool_call_id TEXT, tool_calls TEXT, tool_name TEXT, "
                 "timestamp REAL, active INTEGER NOT NULL DEFAULT 1, "
                 "compacted INTEGER NOT NULL DEFAULT 0)")
    conn.execute("INSERT INTO sessions VALUES (?, 'cli', 'sys')", (SID,))
    for i in range(10):
        conn.execute("INSERT INTO messages(session_id, role, content, timestamp) VALUES (?,?,?,?)",
                     (SID, ("user", "assistant")[i % 2], "turn %d" % i, 1000.0 + i))
    return conn


def _uncommitted(conn):
    # a write whose pages already reached the main file (a small cache spills them)
    conn.execute("PRAGMA cache_size=2")
    conn.execute("BEGIN IMMEDIATE")
    for i in range(200):
        conn.execute("INSERT INTO messages(session_id, role, content, timestamp) VALUES (?,?,?,?)",
                     (SID, "user", "UNCOMMITTED %d %s" % (i, "z" * 3000), 2000.0))
'''
_ns: dict = {}
exec(_BUILD, _ns)
_state_db, _uncommitted = _ns["_state_db"], _ns["_uncommitted"]


def test_a_live_writers_uncommitted_rows_are_not_read(tmp_path):
    db = tmp_path / "state.db"
    writer = _state_db(db)
    _uncommitted(writer)
    try:
        reader = connect(db, timeout=0)
        try:
            rows = reader.execute("SELECT content FROM messages").fetchall()
        except sqlite3.OperationalError as exc:     # locked: the reader waits, then says so
            assert "locked" in str(exc)
        else:
            assert not any("UNCOMMITTED" in r[0] for r in rows)
        finally:
            reader.close()
    finally:
        writer.execute("ROLLBACK")
        writer.close()


def test_a_db_at_rest_in_rollback_mode_is_read_and_left_as_it_was(tmp_path):
    db = tmp_path / "state.db"
    _state_db(db).close()
    before = sorted(p.name for p in tmp_path.iterdir()), db.read_bytes()
    conn = connect(db)
    assert conn.execute("SELECT count(*) FROM messages").fetchone()[0] == 10
    conn.close()
    assert (sorted(p.name for p in tmp_path.iterdir()), db.read_bytes()) == before


_KILLED_WRITER = _BUILD + """
import os, sys
_uncommitted(_state_db(sys.argv[1]))
os._exit(0)                       # killed mid-write: its journal stays beside state.db
"""


def test_replay_after_a_writer_was_killed_mid_write(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    subprocess.run([sys.executable, "-c", _KILLED_WRITER, str(home / "state.db")], check=True,
                   timeout=60)
    assert (home / "state.db-journal").exists()
    before = (home / "state.db").read_bytes()
    proc = run_cli("replay", SID, "--context-length", "64000", "--json", home=home, env=LOCAL)
    assert "UNCOMMITTED" not in proc.stdout
    one_line_error(proc, "state.db-journal", "hermes sessions list")
    assert proc.returncode == 1
    assert (home / "state.db").read_bytes() == before and (home / "state.db-journal").exists()


if __name__ == "__main__":
    sys.exit(pytest.main([__file__]))
