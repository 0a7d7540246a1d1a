"""``python3 <plugin dir> replay <session id>`` on sessions the REAL ``hermes chat`` wrote:
one short one, and one with a 64K window that compacted (its compaction count must come back).

A one-turn session (a parallel read of two files) is created with the
fake LLM in a throw-away HERMES_HOME; the CLI then reads it read-only from ``state.db`` under
the Hermes venv's Python (so Hermes is importable and our ``tools.py`` must not shadow it).
"""
from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
import harness  # noqa: E402
from tests.fakes.fake_llm import FakeLLM  # noqa: E402

HERMES_VERSION = harness.hermes_version() or "unknown"

if not harness.hermes_bin().exists():  # pragma: no cover - wrong interpreter
    pytest.skip(f"hermes CLI not found next to {sys.executable}; run tests/e2e with the "
                "Hermes venv's python", allow_module_level=True)


def cli(home: Path, *args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TENCENTDB_OFFLOAD_", "HERMES_"))}
    env.update(HERMES_HOME=str(home), TENCENTDB_OFFLOAD_GATEWAY_URL="off",
               PYTHONDONTWRITEBYTECODE="1", PYTHONIOENCODING="utf-8")
    return subprocess.run([sys.executable, str(harness.REPO_ROOT)] + list(args), capture_output=True,
                          text=True, env=env, timeout=120, cwd=str(home.parent))


@pytest.mark.parametrize("hermes", [HERMES_VERSION], ids=lambda v: f"hermes-{v}")
def test_replay_of_a_real_hermes_session(tmp_path, hermes):
    files = harness.make_text_files(tmp_path / "files", 2, tag="replay")
    with FakeLLM() as llm:
        home = harness.make_home(tmp_path, llm.url, engine="compressor", enabled_plugins=())
        conv = harness.Conversation(llm, home)
        last = conv.say("DO read " + " ".join(p for p, _ in files))
    sid = last.result.session_id
    assert sid, last.result.describe()

    db = home / "state.db"
    conn = sqlite3.connect("file:%s?mode=ro" % db, uri=True)
    cols = [r[1] for r in conn.execute("PRAGMA table_info(messages)")]
    where = " AND active=1" if "active" in cols else ""
    (count,) = conn.execute("SELECT count(*) FROM messages WHERE session_id=?" + where, (sid,)).fetchone()
    (listed,) = conn.execute("SELECT message_count FROM sessions WHERE id=?", (sid,)).fetchone()
    conn.close()
    assert count == listed == 5, (count, listed)      # user, asst+2 calls, 2 results, asst
    stamp = (db.stat().st_mtime_ns, db.stat().st_size)

    proc = cli(home, "replay", sid, "--json")
    assert proc.returncode == 0, proc.stderr + proc.stdout[-2000:]
    rep = json.loads(proc.stdout)
    s = rep["summary"]
    src = rep["source"]
    assert {k: src[k] for k in ("kind", "session_id", "database", "compacted_rows", "rows_read",
                                "messages")} == {"kind": "hermes-session", "session_id": sid,
                                                 "database": str(db), "compacted_rows": 0,
                                                 "rows_read": count, "messages": count}
    # Hermes' tool schemas are not in state.db: a stand-in sized from the usage totals
    assert src["schema_tokens_estimated"] > 1000 and len(src["not_reconstructed"]) == 1
    assert s["messages_read"] == count and s["turns"] == 1
    assert s["tool_results"] == 2 and s["invalid_requests"] == 0 and s["compactions"] == 0
    assert rep["recall"]["ok"] and rep["recall"]["tool_name"] == "read_file"
    assert (db.stat().st_mtime_ns, db.stat().st_size) == stamp, "replay wrote to state.db"

    text = cli(home, "replay", sid)
    assert text.returncode == 0 and "hermes-session %s" % sid in text.stdout, text.stderr
    bad = cli(home, "replay", "no_such_session_id")
    assert bad.returncode == 1 and len(bad.stderr.strip().splitlines()) == 1
    assert "no session" in bad.stderr


CONTEXT = 64_000


def _live_compactions(home: Path) -> int:
    conn = sqlite3.connect("file:%s?mode=ro" % (home / "tencentdb-offload" / "store.db"), uri=True)
    try:
        return conn.execute("SELECT count(*) FROM events WHERE kind='compaction'").fetchone()[0]
    finally:
        conn.close()


@pytest.mark.parametrize("hermes", [HERMES_VERSION], ids=lambda v: f"hermes-{v}")
def test_replay_reproduces_a_real_64k_session_with_compactions(tmp_path, hermes):
    """Recorded by the real ``hermes chat`` with this engine and a 64K window in config.yaml:
    replay (no flags) takes the window from config.yaml, reads the rows Hermes marked as
    compacted, and compacts as often as the live session did."""
    if hermes.startswith("0.17"):
        pytest.skip("0.17 starts a new session at each compaction (no compacted rows to replay)")
    supply = harness.FileSupply(tmp_path / "files", tag="replay64")
    with FakeLLM() as llm:
        home = harness.make_home(tmp_path, llm.url, context_length=CONTEXT,
                                 env={"TENCENTDB_OFFLOAD_GATEWAY_URL": "off"})
        conv = harness.Conversation(llm, home)
        harness.read_files_turn(conv, supply.take(3))
        harness.assert_engine_used(conv)
        harness.fill_until_compactions(conv, supply, needed=1, threshold_tokens=int(CONTEXT * 0.75),
                                       context_length=CONTEXT)
        last = conv.say("DO read " + " ".join(p for p, _ in supply.take(1)))
    sid = last.result.session_id
    live = _live_compactions(home)
    assert live >= 1, conv.summary()

    proc = cli(home, "replay", sid, "--json")
    assert proc.returncode == 0, proc.stderr + proc.stdout[-2000:]
    rep = json.loads(proc.stdout)
    src, s = rep["source"], rep["summary"]
    assert rep["context_length"] == CONTEXT and "config.yaml" in rep["window_from"]
    assert src["compacted_rows"] > 0, src
    assert s["turns"] == len(conv.turns) and s["invalid_requests"] == 0
    assert src["live_compactions"] == live, src     # read from state.db alone
    assert s["compactions"] == live, (s["compactions"], live, [t["action"] for t in rep["turns"]])
    text = cli(home, "replay", sid)
    assert "window 64,000 tokens (from model.context_length in" in text.stdout, text.stdout[:600]
