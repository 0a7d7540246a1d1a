"""A store in rollback-journal mode (a file system without WAL: SQLite keeps the store so when
the switch to WAL is refused) while another process holds its write lock: the readers wait
for it (5 s) and then say the store is busy, never that it is corrupt ("the plugin moves a
corrupt store aside")."""

from __future__ import annotations

import sqlite3
import subprocess
import sys

import pytest

from tencentdb_offload.archive import browse, readonly
from tencentdb_offload.archive.store import Store


def test_the_reason_names_a_busy_store(tmp_path):
    Store(tmp_path).close()
    writer = sqlite3.connect(str(tmp_path / "store.db"), isolation_level=None)
    writer.execute("PRAGMA journal_mode=DELETE")
    writer.execute("BEGIN EXCLUSIVE")
    try:
        why = readonly.problem(tmp_path / "store.db")
    finally:
        writer.execute("ROLLBACK")
        writer.close()
    assert "another process is writing it" in why and "corrupt" not in why, why


_KILLED = """
import os, sqlite3, sys, time
conn = sqlite3.connect(sys.argv[1], isolation_level=None)
conn.execute("PRAGMA journal_mode=DELETE")
conn.execute("PRAGMA cache_size=2")
conn.execute("BEGIN IMMEDIATE")
for _ in range(300):
    conn.execute("INSERT INTO events(ts,session,kind,data) VALUES (?,?,?,?)",
                 (time.time(), "s", "x", "y" * 3000))
os._exit(0)                 # stopped mid-write: its journal stays
"""


def test_a_write_left_unfinished_is_named(tmp_path):
    Store(tmp_path).close()
    subprocess.run([sys.executable, "-c", _KILLED, str(tmp_path / "store.db")], check=True,
                   timeout=60)
    assert (tmp_path / "store.db-journal").exists()
    why = readonly.problem(tmp_path / "store.db")
    assert "store.db-journal" in why and "corrupt" not in why and "readonly" not in why, why


def test_archive_commands_name_it_too(tmp_path):
    Store(tmp_path).close()
    subprocess.run([sys.executable, "-c", _KILLED, str(tmp_path / "store.db")], check=True,
                   timeout=60)
    with pytest.raises(browse.BrowseError) as caught:
        browse.open_readonly(tmp_path)
    assert "store.db-journal" in str(caught.value) and "readonly" not in str(caught.value)
