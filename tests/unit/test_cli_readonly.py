"""``status`` and ``doctor`` say they write nothing: every byte of store.db, -wal and -shm (and
the set of files) is the same after them, for a store at rest, one an older plugin made, and
one a writer left with its WAL."""

from __future__ import annotations

import hashlib
import json
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tencentdb_offload.archive.outbox import Outbox
from tencentdb_offload.archive.store import ArchiveItem, Store

from helpers import archive_items, run_cli


def cli(home: Path, *args: str) -> subprocess.CompletedProcess:
    return run_cli(args, env={"HERMES_HOME": str(home), "TENCENTDB_OFFLOAD_GATEWAY_URL": "off"},
                   cwd=home.parent)


def snapshot(directory: Path) -> dict:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(directory.iterdir()) if p.name.startswith("store.db")}


def current_store(directory: Path) -> None:
    st = Store(directory)
    now = time.time()
    archive_items(st, "conv-1", [ArchiveItem("tool_result", "alpha " * 50, "c1", "grep")])
    st.transaction([Outbox.op_enqueue("conv-1", "prompt", {"prompt": "p"}, now),
                    Store.op_event("conv-1", "compaction", {"path": "local", "level": "",
                                   "tokens_before": 900, "tokens_after": 400, "archived": 3}, now)])
    st.close()


def old_store(directory: Path) -> None:
    """The schema of a store before outbox rows referenced the archive (no counters, aliases,
    leases; no archive_id/bytes columns)."""
    conn = sqlite3.connect(str(directory / "store.db"))
    conn.executescript("""
        CREATE TABLE archive(id INTEGER PRIMARY KEY, session TEXT NOT NULL, item_key TEXT NOT NULL,
          kind TEXT NOT NULL, tool_call_id TEXT, tool_name TEXT, role TEXT, args TEXT,
          content TEXT NOT NULL, chars INTEGER NOT NULL, created REAL NOT NULL);
        CREATE TABLE outbox(id INTEGER PRIMARY KEY, session TEXT NOT NULL, kind TEXT NOT NULL,
          payload TEXT NOT NULL, created REAL NOT NULL, attempts INTEGER NOT NULL DEFAULT 0,
          dead INTEGER NOT NULL DEFAULT 0, last_error TEXT);
        CREATE TABLE events(id INTEGER PRIMARY KEY, ts REAL NOT NULL, session TEXT,
          kind TEXT NOT NULL, data TEXT NOT NULL);""")
    conn.execute("INSERT INTO archive(session,item_key,kind,content,chars,created) VALUES "
                 "('old-conv','msg:1','message','old text',8,?)", (time.time(),))
    conn.execute("INSERT INTO outbox(session,kind,payload,created,last_error) VALUES "
                 "('old-conv','pair','{}',?,'HTTP 500')", (time.time(),))
    conn.commit()
    conn.close()


def store_with_wal(directory: Path) -> None:
    """A writer that died holding its WAL (no checkpoint at close)."""
    current_store(directory)
    code = ("import sqlite3,os,sys; c=sqlite3.connect(sys.argv[1]); c.execute('PRAGMA wal_autocheckpoint=0');"
            "c.execute(\"INSERT INTO archive(session,item_key,kind,content,chars,created) VALUES "
            "('conv-2','msg:x','message','in the wal',10,1)\"); c.commit(); os._exit(0)")
    subprocess.run([sys.executable, "-c", code, str(directory / "store.db")], check=True)
    assert (directory / "store.db-wal").stat().st_size > 0


@pytest.mark.parametrize("make", [current_store, old_store, store_with_wal])
def test_status_and_doctor_leave_the_store_byte_identical(tmp_path, make):
    home = tmp_path / "home"
    directory = home / "tencentdb-offload"
    directory.mkdir(parents=True)
    make(directory)
    before = snapshot(directory)
    text = cli(home, "status")
    assert text.returncode == 0, text.stderr
    data = json.loads(cli(home, "status", "--json").stdout)
    doctor = json.loads(cli(home, "doctor", "--json", "--timeout", "0.5").stdout)
    assert snapshot(directory) == before
    assert data["store"]["archived_items"] >= 1
    outbox = [c for c in doctor["checks"] if c["name"] == "outbox"]
    assert outbox and "cannot read" not in outbox[0]["message"], outbox
    if make is store_with_wal:       # what only the WAL holds is shown too
        assert "conv-2" in {s["session"] for s in data["sessions"]}
    if make is old_store:
        assert data["store"]["outbox_backlog"] == 1 and data["errors"][0]["error"] == "HTTP 500"
