"""A hermes-lcm store for tests: its ``lcm.db`` schema (messages + external-content FTS5 index
+ summary DAG + metadata), WAL mode as hermes-lcm leaves it, filled with a few thousand rows of
English, Chinese and code."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

SCHEMA = """
CREATE TABLE messages (
    store_id INTEGER PRIMARY KEY AUTOINCREMENT, session_id TEXT NOT NULL, source TEXT DEFAULT '',
    role TEXT NOT NULL, content TEXT, tool_call_id TEXT, tool_calls TEXT, tool_name TEXT,
    timestamp REAL NOT NULL, token_estimate INTEGER DEFAULT 0, pinned INTEGER DEFAULT 0);
CREATE INDEX idx_msg_session ON messages(session_id, store_id);
CREATE VIRTUAL TABLE messages_fts USING fts5(content, content='messages', content_rowid='store_id');
CREATE TRIGGER msg_fts_insert AFTER INSERT ON messages BEGIN
    INSERT INTO messages_fts(rowid, content) VALUES (new.store_id, new.content); END;
CREATE TABLE summary_nodes (
    node_id INTEGER PRIMARY KEY AUTOINCREMENT, session_id TEXT NOT NULL, depth INTEGER NOT NULL DEFAULT 0,
    summary TEXT NOT NULL, token_count INTEGER DEFAULT 0, source_token_count INTEGER DEFAULT 0,
    source_ids TEXT NOT NULL DEFAULT '[]', source_type TEXT NOT NULL DEFAULT 'messages',
    created_at REAL NOT NULL, earliest_at REAL, latest_at REAL, expand_hint TEXT DEFAULT '');
CREATE TABLE metadata (key TEXT PRIMARY KEY, value TEXT);
INSERT INTO metadata VALUES ('schema_version', '4');
"""

UNIQUE_WORD = "zephyrquartz"          # only in the LCM store
UNIQUE_CHINESE = "量子蝴蝶协议"         # only in the LCM store
LONG_TAIL = "END-OF-THE-LONG-MESSAGE"


def build(path: Path, rows: int = 3000, wal: bool = True) -> Path:
    """An lcm.db at ``path``; the last message holds both unique strings and is 30k chars."""
    conn = sqlite3.connect(str(path))
    if wal:
        conn.execute("PRAGMA journal_mode=WAL")
    conn.executescript(SCHEMA)
    base = 1_700_000_000.0
    texts = ["let us refactor the parser in session %d",
             "数据库迁移已经完成，第 %d 步",
             "def handler_%d(event):\n    return {'status': 200, 'body': event['body']}",
             "the build failed with exit code %d"]
    with conn:
        for i in range(rows):
            role = ("user", "assistant", "tool")[i % 3]
            conn.execute("INSERT INTO messages(session_id, role, content, tool_name, timestamp) "
                         "VALUES (?,?,?,?,?)", ("sess-%d" % (i // 300), role, texts[i % 4] % i,
                                                 "terminal" if role == "tool" else None, base + i * 60))
        long_text = ("我们用 %s 部署了 %s。\n" % (UNIQUE_WORD, UNIQUE_CHINESE)) + "x = 1\n" * 5000 + LONG_TAIL
        conn.execute("INSERT INTO messages(session_id, role, content, timestamp) VALUES (?,?,?,?)",
                     ("sess-old", "assistant", long_text, base + rows * 60))
        for d in range(20):
            conn.execute("INSERT INTO summary_nodes(session_id, depth, summary, source_ids, created_at) "
                         "VALUES (?,?,?,?,?)", ("sess-%d" % d, d % 2, "summary %d" % d,
                                                json.dumps([d * 10, d * 10 + 9]), base + d))
    conn.close()
    return path
