"""A store in rollback-journal mode (a file system without WAL: SQLite keeps the store so when
the switch to WAL is refused) while another process holds its write lock: the readers wait
for it (5 s) and then say the store is busy, never that it is corrupt ("the plugin moves a
corrupt store aside")."""

from __future__ import annotations

import sqlite3

from tencentdb_offload.archive import readonly
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
