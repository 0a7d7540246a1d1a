"""``python3 <plugin dir> replay <session id>`` on a session the REAL ``hermes chat`` wrote.

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
    assert rep["source"] == {"kind": "hermes-session", "session_id": sid, "database": str(db),
                             "inactive_rows_skipped": rep["source"]["inactive_rows_skipped"],
                             "messages": count}
    assert s["messages_read"] == count and s["turns"] == 1
    assert s["tool_results"] == 2 and s["invalid_requests"] == 0 and s["compactions"] == 0
    assert rep["recall"]["ok"] and rep["recall"]["tool_name"] == "read_file"
    assert (db.stat().st_mtime_ns, db.stat().st_size) == stamp, "replay wrote to state.db"

    text = cli(home, "replay", sid)
    assert text.returncode == 0 and "hermes-session %s" % sid in text.stdout, text.stderr
    bad = cli(home, "replay", "no_such_session_id")
    assert bad.returncode == 1 and len(bad.stderr.strip().splitlines()) == 1
    assert "no session" in bad.stderr
