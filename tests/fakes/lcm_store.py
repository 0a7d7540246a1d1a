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


# --- LCM-X v0.24-v0.26 (hermes-lcm renamed: plugin hermes-lcm-x, engine lcm-x) ---------------
# Schema 5: the messages table gained columns, and side tables came without a version change
# (message_relations in v0.24.4, summary_node_provenance in v0.24.8); FTS over messages as before.
# A tool output LCM-X externalized lives in a JSON file of its payload folder
# ($HERMES_HOME/lcm-large-outputs by default); the row keeps a one-line stub naming it.
SCHEMA_X = """
CREATE TABLE messages (
    store_id INTEGER PRIMARY KEY AUTOINCREMENT, session_id TEXT NOT NULL, source TEXT DEFAULT '',
    conversation_id TEXT DEFAULT '', role TEXT NOT NULL, content TEXT, tool_call_id TEXT,
    tool_calls TEXT, tool_name TEXT, timestamp REAL NOT NULL, token_estimate INTEGER DEFAULT 0,
    pinned INTEGER DEFAULT 0, ingested_at REAL, observed_at REAL, observed_at_source TEXT);
CREATE INDEX idx_msg_session ON messages(session_id, store_id);
CREATE INDEX idx_msg_session_ts ON messages(session_id, timestamp);
CREATE VIRTUAL TABLE messages_fts USING fts5(content, content='messages', content_rowid='store_id');
CREATE TRIGGER msg_fts_insert AFTER INSERT ON messages BEGIN
    INSERT INTO messages_fts(rowid, content) VALUES (new.store_id, new.content); END;
CREATE TABLE summary_nodes (
    node_id INTEGER PRIMARY KEY AUTOINCREMENT, session_id TEXT NOT NULL, depth INTEGER NOT NULL DEFAULT 0,
    summary TEXT NOT NULL, token_count INTEGER DEFAULT 0, source_token_count INTEGER DEFAULT 0,
    source_ids TEXT NOT NULL DEFAULT '[]', source_type TEXT NOT NULL DEFAULT 'messages',
    created_at REAL NOT NULL, earliest_at REAL, latest_at REAL, expand_hint TEXT DEFAULT '');
CREATE TABLE summary_node_provenance (
    node_id INTEGER PRIMARY KEY, escalation_level INTEGER, model TEXT, recorded_at REAL);
CREATE TABLE message_relations (
    relation_id INTEGER PRIMARY KEY AUTOINCREMENT, kind TEXT NOT NULL, store_id INTEGER NOT NULL,
    related_store_id INTEGER NOT NULL, detail TEXT, created_at REAL);
CREATE TABLE lcm_lifecycle_state (
    conversation_id TEXT PRIMARY KEY, current_session_id TEXT, current_frontier_store_id INTEGER,
    updated_at REAL);
CREATE TABLE lcm_rollups (
    rollup_id TEXT PRIMARY KEY, period_kind TEXT, period_key TEXT, summary TEXT, created_at REAL);
CREATE TABLE metadata (key TEXT PRIMARY KEY, value TEXT);
INSERT INTO metadata VALUES ('schema_version', '5');
"""

X_WORD = "obsidianlantern"          # only inside an externalized output (never in lcm.db)


def stub(ref: str, tool_call_id: str, chars: int, tool: str = "", rollback_form: bool = False) -> str:
    """The row text LCM-X leaves for an externalized tool output: v0.24.8 on names the tool and
    the read-back call; v0.24.0-v0.24.7 did not (``rollback_form``)."""
    if rollback_form:
        return "[Externalized tool output: tool_call_id=%s; chars=%d; bytes=%d; ref=%s]" % (
            tool_call_id, chars, chars, ref)
    return ('[Externalized tool output: tool=%s; tool_call_id=%s; chars=%d; bytes=%d; read it with '
            'lcm_expand(externalized_ref="%s"); ref=%s]' % (tool or "?", tool_call_id, chars, chars, ref, ref))


def build_x(home: Path, rows: int = 300) -> dict:
    """An LCM-X store at ``home/lcm.db`` with its payload folder ``home/lcm-large-outputs``:
    ``rows`` ordinary messages, then four stubbed rows (returned by name with their store ids):
    ``new`` (v0.24.8+ form, file present), ``old`` (v0.24.0-7 form, present), ``gone`` (file
    deleted) and ``other`` (another session's payload behind a stub in session ``sess-x``)."""
    db = home / "lcm.db"
    folder = home / "lcm-large-outputs"
    folder.mkdir(parents=True, exist_ok=True)
    conn = sqlite3.connect(str(db))
    conn.execute("PRAGMA journal_mode=WAL")
    conn.executescript(SCHEMA_X)
    base = 1_790_000_000.0
    out: dict = {"db": db, "folder": folder}
    with conn:
        for i in range(rows):
            role = ("user", "assistant", "tool")[i % 3]
            conn.execute("INSERT INTO messages(session_id, conversation_id, role, content, tool_name, "
                         "timestamp, ingested_at) VALUES (?,?,?,?,?,?,?)",
                         ("sess-x", "conv-x", role, "step %d of the deploy" % i,
                          "terminal" if role == "tool" else None, base + i * 60, base + i * 60))
        payloads = {
            "new": ("20261001_120000_call_read_0123456789ab_18a2b3c4d5e6f708.json", "call_read", "read_file",
                    "sess-x", False),
            "old": ("20260926_080000_call_log_aaaaaaaaaaaa_18a2b3c4d5e6f001.json", "call_log", "", "sess-x", True),
            "gone": ("20260927_080000_call_gone_bbbbbbbbbbbb_18a2b3c4d5e6f002.json", "call_gone", "terminal",
                     "sess-x", False),
            "other": ("20260928_080000_call_priv_cccccccccccc_18a2b3c4d5e6f003.json", "call_priv", "terminal",
                      "sess-someone-else", False),
        }
        for n, (name, (ref, call, tool, owner, rollback)) in enumerate(payloads.items()):
            text = "%s output of %s: %s\n" % (name, call, X_WORD) + "line\n" * 4000 + "END-%s" % name
            (folder / ref).write_text(json.dumps({
                "kind": "tool_result", "tool_call_id": call, "role": "tool", "session_id": owner,
                "tool_name": tool, "content": text, "content_chars": len(text),
                "content_bytes": len(text.encode("utf-8")), "created_at": base}), encoding="utf-8")
            cur = conn.execute("INSERT INTO messages(session_id, conversation_id, role, content, tool_call_id, "
                               "tool_name, timestamp) VALUES (?,?,?,?,?,?,?)",
                               ("sess-x", "conv-x", "tool", stub(ref, call, len(text), tool, rollback), call,
                                tool or None, base + (rows + n) * 60))
            out[name] = {"store_id": cur.lastrowid, "ref": ref, "path": folder / ref, "text": text}
        conn.execute("INSERT INTO message_relations(kind, store_id, related_store_id, created_at) "
                     "VALUES ('merged_piece', 2, 1, ?)", (base,))
        conn.execute("INSERT INTO summary_nodes(session_id, summary, source_ids, created_at) VALUES (?,?,?,?)",
                     ("sess-x", "the deploy, summarised", "[1, 2, 3]", base))
        conn.execute("INSERT INTO summary_node_provenance VALUES (1, 1, 'some-model', ?)", (base,))
    conn.close()
    (folder / payloads["gone"][0]).unlink()
    return out
